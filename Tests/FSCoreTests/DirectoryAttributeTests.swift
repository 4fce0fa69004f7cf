import Foundation
import Testing
@testable import FSCore
import FSCoreTesting

/// A directory's mode, owner and sticky bit live on its `dir/` placeholder
/// (`AttributeMapper`). Every way the core learns about a directory must
/// give it those: a lookup's probe, a listing's entries (readdirplus), a
/// lookup answered from a cached listing, a listing read again after the
/// TTL, a new mount over the same bucket, a tree walk's flat listing, and
/// a v0 listing (which returns no placeholders). Otherwise, under
/// `default_permissions`, a 0700 directory opens up to everyone.
@Suite("directory attributes from listings")
struct DirectoryAttributeTests {
    static let privateMetadata = [
        AttributeMapper.modeKey: "40700", AttributeMapper.uidKey: "1001", AttributeMapper.gidKey: "1001",
    ]
    static let sharedMetadata = [
        AttributeMapper.modeKey: "41777", AttributeMapper.uidKey: "0", AttributeMapper.gidKey: "0",
    ]

    /// w/x (0700, 1001:1001) holding a secret, w/shared (1777, 0:0), and
    /// w/plain, an implicit directory (no placeholder: the mount's defaults).
    static func seed(_ store: InMemoryObjectStore, under top: String = "w") {
        store.seed("\(top)/x/", customMetadata: privateMetadata)
        store.seed("\(top)/x/secret", bytes(6))
        store.seed("\(top)/shared/", customMetadata: sharedMetadata)
        store.seed("\(top)/plain/f", bytes(1))
    }

    /// Checks the three directories' attributes as `attributes(name)` gives them.
    static func expectSeeded(_ attributes: [String: FileAttributes], sourceLocation: SourceLocation = #_sourceLocation) {
        let x = attributes["x"], shared = attributes["shared"], plain = attributes["plain"]
        #expect(x?.mode == UInt32(S_IFDIR) | 0o700 && x?.uid == 1001 && x?.gid == 1001, "x: \(String(describing: x))", sourceLocation: sourceLocation)
        #expect(shared?.mode == UInt32(S_IFDIR) | 0o1777 && shared?.uid == 0 && shared?.gid == 0, "shared: \(String(describing: shared))", sourceLocation: sourceLocation)
        #expect(plain?.mode == UInt32(S_IFDIR) | 0o755 && plain?.uid == 1000 && plain?.gid == 1000, "plain: \(String(describing: plain))", sourceLocation: sourceLocation)
    }

    static func entries(_ h: Harness, _ inode: UInt64) async throws -> [String: FileAttributes] {
        Dictionary(uniqueKeysWithValues: try await h.list(inode).dropFirst(2).map { ($0.name, $0.entry.attributes) })
    }

    static func lookups(_ h: Harness, _ parent: UInt64) async throws -> [String: FileAttributes] {
        var found: [String: FileAttributes] = [:]
        for name in ["x", "shared", "plain"] { found[name] = try await h.fs.lookup(parent: parent, name: name).attributes }
        return found
    }

    // Checks semantics.md#shows-implicit-directories
    @Test func readdirplusEntriesCarryThePlaceholdersAttributes() async throws {
        let h = try Harness()
        Self.seed(h.store)
        let w = try await h.lookup("w").attributes.inode
        Self.expectSeeded(try await Self.entries(h, w))
        // And the lookups `ls -l` makes next are answered from what the
        // listing put in the stat cache: no request.
        h.store.resetCounters()
        Self.expectSeeded(try await Self.lookups(h, w))
        #expect(h.store.totalRequests == 0)
    }

    @Test func lookupsFromACachedListingCarryThePlaceholdersAttributes() async throws {
        let h = try Harness()
        Self.seed(h.store)
        // The lookup of w reads w/'s listing (its probe) and keeps it; the
        // stat cache knows nothing of w's entries yet.
        let w = try await h.lookup("w").attributes.inode
        h.store.resetCounters()
        Self.expectSeeded(try await Self.lookups(h, w))
        #expect(h.store.totalRequests == 0, "answered from the cached listing")
    }

    @Test func afterTheTTLTheListingReadAgainCarriesThemToo() async throws {
        let h = try Harness()
        Self.seed(h.store)
        let w = try await h.lookup("w").attributes.inode
        Self.expectSeeded(try await Self.lookups(h, w))

        h.clock.advance(by: .seconds(61))
        h.store.resetCounters()
        // A lookup after the TTL relists the small directory (one request)
        // and answers every name from that listing.
        Self.expectSeeded(try await Self.lookups(h, w))
        #expect(h.store.requestCount(.list) == 1 && h.store.totalRequests == 1)

        h.clock.advance(by: .seconds(61))
        Self.expectSeeded(try await Self.entries(h, w))
        let x = try await h.fs.lookup(parent: w, name: "x").attributes.inode
        #expect(try await h.fs.getattr(x).attributes.mode == UInt32(S_IFDIR) | 0o700)
    }

    // Checks semantics.md#write-attributes
    @Test func aNewMountSeesWhatChmodAndChownStored() async throws {
        let store = InMemoryObjectStore()
        store.seed("w/plain/f", bytes(1))
        let first = try Harness(store: store)
        let w = try await first.lookup("w").attributes.inode
        let x = try await first.fs.mkdir(parent: w, name: "x", mode: 0o755).attributes.inode
        _ = try await first.fs.setattr(x, handle: nil, changes: AttributeChanges(mode: 0o700, uid: 1001, gid: 1001))
        let shared = try await first.fs.mkdir(parent: w, name: "shared", mode: 0o755).attributes.inode
        _ = try await first.fs.setattr(shared, handle: nil, changes: AttributeChanges(mode: 0o1777, uid: 0, gid: 0))
        // This mount's own listing of w shows the changes.
        Self.expectSeeded(try await Self.entries(first, w))

        // A remount: a new core over the same bucket; `ls w` first.
        let second = try Harness(store: store)
        let w2 = try await second.lookup("w").attributes.inode
        Self.expectSeeded(try await Self.entries(second, w2))
        let third = try Harness(store: store)
        Self.expectSeeded(try await Self.lookups(third, try await third.lookup("w").attributes.inode))
    }

    @Test func aChmodHereIsNotUndoneByAListingReadBeforeIt() async throws {
        let h = try Harness()
        Self.seed(h.store)
        let w = try await h.lookup("w").attributes.inode
        let x = try await h.fs.lookup(parent: w, name: "x").attributes.inode
        _ = try await h.fs.setattr(x, handle: nil, changes: AttributeChanges(mode: 0o750))
        // The listing the lookup of w read holds x/ as it was; the change
        // amended it, so neither the entries nor a lookup go back to 0700.
        #expect(try await Self.entries(h, w)["x"]?.mode == UInt32(S_IFDIR) | 0o750)
        #expect(try await h.fs.lookup(parent: w, name: "x").attributes.mode == UInt32(S_IFDIR) | 0o750)
    }

    @Test func aTreeWalkCarriesThePlaceholdersOfTheDirectoriesItLists() async throws {
        let h = try Harness()
        h.store.seed("top/a/f", bytes(1))
        Self.seed(h.store, under: "top/b")
        h.store.seed("top/c/f", bytes(1))
        let top = try await h.lookup("top").attributes.inode
        _ = try await h.list(top)
        let a = try await h.fs.lookup(parent: top, name: "a").attributes.inode
        _ = try await h.list(a)
        h.store.resetCounters()
        // The second subdirectory opened starts a walk of top/; b's listing
        // (and so its entries) come from the flat listing.
        let b = try await h.fs.lookup(parent: top, name: "b").attributes.inode
        Self.expectSeeded(try await Self.entries(h, b))
        #expect(h.store.requestCount(.listFlat) == 1 && h.store.requestCount(.list) == 0)
    }

    // Checks semantics.md#shows-implicit-directories
    @Test func aV0ListingStatsThePlaceholdersOfItsDirectories() async throws {
        let h = try Harness(store: InMemoryObjectStore(capabilities: .firebase))
        Self.seed(h.store)
        let w = try await h.lookup("w").attributes.inode
        h.store.resetCounters()
        Self.expectSeeded(try await Self.entries(h, w))
        #expect(h.store.requestCount(.stat) == 3, "one stat per placeholder (x/, shared/, plain/ which has none)")
        h.store.resetCounters()
        Self.expectSeeded(try await Self.lookups(h, w))
        #expect(h.store.totalRequests == 0)

        // A remount whose first question is a lookup below w.
        let again = try Harness(store: h.store)
        let w2 = try await again.lookup("w").attributes.inode
        _ = try await again.fs.opendir(w2)  // read and keep the listing, no readdir
        Self.expectSeeded(try await Self.lookups(again, w2))
    }

    @Test func aV0PlaceholderThatMayNotBeReadLeavesTheDefaults() async throws {
        let h = try Harness(store: InMemoryObjectStore(capabilities: .firebase))
        Self.seed(h.store)
        let w = try await h.lookup("w").attributes.inode
        h.store.setFaultHook { operation, name in operation == .stat && name == "w/x/" ? .permissionDenied("rules") : nil }
        let entries = try await Self.entries(h, w)
        #expect(entries["x"]?.mode == UInt32(S_IFDIR) | 0o755, "shown, with the mount's defaults")
        #expect(entries["shared"]?.mode == UInt32(S_IFDIR) | 0o1777)
        h.clock.advance(by: .seconds(61))
        h.store.setFaultHook { operation, name in operation == .stat && name == "w/x/" ? .unavailable("down") : nil }
        await expectErrno(EIO) { _ = try await h.list(w) }
    }
}
