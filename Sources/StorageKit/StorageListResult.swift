import Foundation

/// One page (or, from `listAll`, all pages) of a listing with delimiter
/// `/`: the prefixes ("directories") and items ("files") directly below
/// the listed reference.
///
/// Names that cannot be references are left out, as in Firebase: an object
/// whose name contains `//` or ends in `/` is never an item, and a prefix
/// with an empty segment (`wrongPrefix//`) is never a prefix. In a bucket
/// holding `correctPrefix/happyItem`, `wrongPrefix//sadItem` and
/// `lonelyItem/`, the root lists the three prefixes and no items,
/// `correctPrefix` lists one item, `wrongPrefix` and `lonelyItem` none.
public struct StorageListResult: Sendable {
    /// References to the prefixes below the listed reference (`a/b/` from
    /// the server becomes the reference `a/b`).
    public let prefixes: [StorageReference]
    /// References to the objects directly below the listed reference.
    public let items: [StorageReference]
    /// The token for the next page; nil on the last page.
    public let pageToken: String?
    /// The metadata of each item, in the order of `items` (the JSON API's
    /// listing carries full object resources, so no extra request is
    /// needed). Empty when the listing carries names only (Firebase's v0).
    public let itemMetadata: [StorageMetadata]
    /// Names (`a/b/`, with the trailing slash) of the placeholder objects
    /// the listing returned: those of listed prefixes (returned when the
    /// request sets `includeTrailingDelimiter`) and that of the listed
    /// reference itself. A prefix in this set is an explicit directory
    /// (made by `mkdir`); one not in it only exists because objects lie below it.
    public let placeholderPrefixes: Set<String>
    /// The metadata of those placeholders, by name, when the listing
    /// carries metadata (the JSON API): an explicit directory's POSIX mode,
    /// owner and times are in its placeholder's custom metadata.
    public let placeholderMetadata: [String: StorageMetadata]

    public init(
        prefixes: [StorageReference], items: [StorageReference], pageToken: String?,
        itemMetadata: [StorageMetadata] = [], placeholderPrefixes: Set<String> = [],
        placeholderMetadata: [String: StorageMetadata] = [:]
    ) {
        self.prefixes = prefixes
        self.items = items
        self.pageToken = pageToken
        self.itemMetadata = itemMetadata
        self.placeholderPrefixes = placeholderPrefixes
        self.placeholderMetadata = placeholderMetadata
    }

    /// Parses an `objects.list` response (`prefixes`, `items`,
    /// `nextPageToken`) for a listing of `listing` with delimiter `/`;
    /// the items' metadata is kept when `itemsCarryMetadata` (the JSON
    /// API; v0 items hold only a name and a bucket).
    init(response: ListingDocument, listing: StorageReference, itemsCarryMetadata: Bool = true) throws(StorageError) {
        let prefix = listing.path.listingPrefix
        let root = listing.root()
        var prefixes: [StorageReference] = []
        var seenPrefixes: Set<String> = []
        for name in response.prefixes {
            guard Self.isDirectChild(name, of: prefix, isPrefix: true), seenPrefixes.insert(name).inserted
            else { continue }
            prefixes.append(root.child(String(name.dropLast())))
        }
        var items: [StorageReference] = []
        var metadata: [StorageMetadata] = []
        var placeholders: Set<String> = []
        var placeholderMetadata: [String: StorageMetadata] = [:]
        for resource in response.items {
            guard let name = resource.name else { continue }
            if name.hasSuffix("/") {
                // A placeholder: of the listed reference itself, or of a
                // listed prefix. Never an item.
                if name == prefix || seenPrefixes.contains(name) {
                    placeholders.insert(name)
                    if itemsCarryMetadata { placeholderMetadata[name] = try StorageMetadata(resource: resource) }
                }
                continue
            }
            guard Self.isDirectChild(name, of: prefix, isPrefix: false) else { continue }
            items.append(root.child(name))
            if itemsCarryMetadata { metadata.append(try StorageMetadata(resource: resource)) }
        }
        let token = response.nextPageToken
        self.init(
            prefixes: prefixes, items: items, pageToken: token?.isEmpty == false ? token : nil,
            itemMetadata: metadata, placeholderPrefixes: placeholders, placeholderMetadata: placeholderMetadata)
    }

    /// The pages of a listing as one result (for `listAll`): prefixes
    /// without duplicates, items in order, no page token.
    init(merging pages: [StorageListResult]) {
        var prefixes: [StorageReference] = []
        var seen: Set<String> = []
        for page in pages {
            for p in page.prefixes where seen.insert(p.fullPath).inserted { prefixes.append(p) }
        }
        self.init(
            prefixes: prefixes, items: pages.flatMap(\.items), pageToken: nil,
            itemMetadata: pages.flatMap(\.itemMetadata),
            placeholderPrefixes: pages.reduce(into: Set()) { $0.formUnion($1.placeholderPrefixes) },
            placeholderMetadata: pages.reduce(into: [:]) { $0.merge($1.placeholderMetadata) { _, later in later } })
    }

    /// Whether the part of `name` below `prefix` is exactly one valid
    /// segment (followed by the delimiter, for a prefix). This
    /// drops names outside the listing (defensive: a server should not send
    /// them), empty segments (`//`) and, for items, the delimiter itself.
    static func isDirectChild(_ name: String, of prefix: String, isPrefix: Bool) -> Bool {
        guard name.hasPrefix(prefix) else { return false }
        var rest = name.dropFirst(prefix.count)
        if isPrefix {
            guard rest.hasSuffix("/") else { return false }
            rest = rest.dropLast()
        }
        // Bytes, not `contains("/")`: Foundation's substring search costs
        // more than the rest of an item's parse.
        guard !rest.isEmpty, !rest.utf8.contains(UInt8(ascii: "/")) else { return false }
        // The whole name must hold no empty segment either (a listing of a
        // prefix reached through a `//` name).
        return !StoragePath.hasEmptySegment(name) && !name.hasPrefix("/")
    }
}

/// One page of a listing without delimiter (`StorageReference.listObjects`):
/// every object below the listed reference, however deep, in name order
/// (UTF-8 bytes), placeholders (`dir/`) and names that cannot be
/// references included, each with its full metadata.
public struct StorageObjectPage: Sendable {
    public let items: [StorageMetadata]
    /// The token for the next page; nil on the last page.
    public let pageToken: String?

    public init(items: [StorageMetadata], pageToken: String?) {
        self.items = items
        self.pageToken = pageToken
    }

    /// Parses a JSON API `objects.list` response made without delimiter.
    init(response: ListingDocument) throws(StorageError) {
        var items: [StorageMetadata] = []
        items.reserveCapacity(response.items.count)
        for resource in response.items {
            items.append(try StorageMetadata(resource: resource))
        }
        let token = response.nextPageToken
        self.init(items: items, pageToken: token?.isEmpty == false ? token : nil)
    }
}
