import Foundation
import Transport

/// Metadata, listing, deletion and server-side copy.
extension StorageReference {
    var api: ObjectAPI { ObjectAPI(storage: storage) }

    /// The object's metadata.
    public func getMetadata() async throws -> StorageMetadata {
        try path.validateForObject()
        let response = try await api.send(
            HTTPRequest(method: .get, url: api.objectURL(fullPath), isIdempotent: true), object: fullPath)
        return try StorageMetadata(resource: ObjectAPI.json(response))
    }

    /// Changes only the properties set on `metadata`; a property set to nil
    /// is deleted, and so is a custom key removed with
    /// `removeCustomMetadata(forKey:)`. Returns the metadata now stored.
    public func updateMetadata(_ metadata: StorageMetadata) async throws -> StorageMetadata {
        try await updateMetadata(metadata, ifMetagenerationMatch: nil)
    }

    /// `updateMetadata(_:)` that applies only while the object's
    /// metageneration is still `ifMetagenerationMatch` (else
    /// `StorageError.preconditionFailed`). The precondition also makes the
    /// request safe to retry. Over Firebase (v0) it is checked by reading
    /// the metadata first, not atomically (see `ObjectAPI+Firebase`).
    public func updateMetadata(
        _ metadata: StorageMetadata, ifMetagenerationMatch: Int64?
    ) async throws -> StorageMetadata {
        try path.validateForObject()
        let api = self.api
        try await api.checkPrecondition(of: fullPath, ifMetagenerationMatch: ifMetagenerationMatch)
        let url = api.objectURL(fullPath, api.preconditions([("ifMetagenerationMatch", ifMetagenerationMatch.map(String.init))]))
        let request = HTTPRequest(
            method: .patch, url: url, headers: ["Content-Type": "application/json; charset=UTF-8"],
            body: .bytes(ObjectAPI.jsonBody(metadata.patchJSON())),
            isIdempotent: api.mayRetry(guardedBy: ifMetagenerationMatch))
        let response = try await api.send(request, object: fullPath)
        return try StorageMetadata(resource: ObjectAPI.json(response))
    }

    /// Deletes the object.
    public func delete() async throws {
        try await delete(ifGenerationMatch: nil)
    }

    /// Deletes the object if its generation is still `ifGenerationMatch`
    /// (over Firebase, checked by reading first, not atomically).
    public func delete(ifGenerationMatch: Int64?) async throws {
        try path.validateForObject()
        let api = self.api
        try await api.checkPrecondition(of: fullPath, ifGenerationMatch: ifGenerationMatch)
        let url = api.objectURL(fullPath, api.preconditions([("ifGenerationMatch", ifGenerationMatch.map(String.init))]))
        _ = try await api.send(
            HTTPRequest(method: .delete, url: url, isIdempotent: api.mayRetry(guardedBy: ifGenerationMatch)), object: fullPath)
    }

    /// One page of at most `maxResults` (1–1000) prefixes and items below
    /// this reference, delimited by `/`.
    public func list(maxResults: Int64) async throws -> StorageListResult {
        try await listPage(maxResults: maxResults, pageToken: nil)
    }

    /// The page after the one that returned `pageToken`.
    public func list(maxResults: Int64, pageToken: String) async throws -> StorageListResult {
        try await listPage(maxResults: maxResults, pageToken: pageToken)
    }

    /// Every prefix and item below this reference, following all pages.
    public func listAll() async throws -> StorageListResult {
        var pages: [StorageListResult] = []
        try await listPages(after: nil) { pages.append($0) }
        return StorageListResult(merging: pages)
    }

    /// A page of the listing. `includeTrailingDelimiter` also asks for the
    /// `dir/` placeholder objects, so explicit directories can be told from
    /// implicit prefixes (the JSON API only: Firebase's v0 listing has no
    /// such option, and its items carry names only, no metadata).
    public func listPage(
        maxResults: Int64, pageToken: String?, includeTrailingDelimiter: Bool = true
    ) async throws -> StorageListResult {
        try checkListing(maxResults: maxResults)
        let response = try await fetchListPage(maxResults: maxResults, pageToken: pageToken, includeTrailingDelimiter)
        return try parseListPage(response)
    }

    /// Every page of the listing after the one that returned `pageToken`
    /// (from the first when nil), handed to `each` in order. Each page is
    /// requested as soon as the previous answer's `nextPageToken` is read
    /// from its raw body (`JSONScan`), before that body is parsed, so the
    /// server builds the next page while this process parses the current
    /// one: one page ahead at most, whatever `each` does.
    public func listPages(
        after pageToken: String?, maxResults: Int64 = 1000, includeTrailingDelimiter: Bool = true,
        _ each: (StorageListResult) throws -> Void
    ) async throws {
        try checkListing(maxResults: maxResults)
        let fetch = { @Sendable (token: String?) in
            Task { try await self.fetchListPage(maxResults: maxResults, pageToken: token, includeTrailingDelimiter) }
        }
        var next: Task<HTTPResponse, any Error>? = fetch(pageToken)
        defer { next?.cancel() }
        while let current = next {
            // The page requests are Tasks of their own, which a cancellation
            // of this one does not reach: it is passed on, so a cancelled
            // listing ends at once, its request in flight with it.
            try Task.checkCancellation()
            let response = try await withTaskCancellationHandler { try await current.value } onCancel: { current.cancel() }
            let guessed: String? = switch JSONScan.topLevelString("nextPageToken", in: response.body) {
            case .found(let token) where !token.isEmpty: token
            case .found, .absent, .unknown: nil
            }
            next = guessed.map(fetch)
            let page = try parseListPage(response)
            // The scan only reads ahead; the parsed page decides (an escaped
            // or unreadable token is requested after the parse).
            if page.pageToken != guessed {
                next?.cancel()
                next = page.pageToken.map(fetch)
            }
            try each(page)
        }
    }

    private func checkListing(maxResults: Int64) throws {
        try path.validateForListing()
        guard (1...1000).contains(maxResults) else {
            throw StorageError.invalidArgument("maxResults must be between 1 and 1000, not \(maxResults)")
        }
    }

    private func fetchListPage(maxResults: Int64, pageToken: String?, _ includeTrailingDelimiter: Bool) async throws -> HTTPResponse {
        let api = self.api
        let prefix = path.isRoot ? nil : fullPath + "/"
        let trailing = includeTrailingDelimiter && api.dialect == .jsonAPI
        let url = api.listURL([
            ("prefix", prefix), ("delimiter", "/"), ("maxResults", String(maxResults)),
            ("pageToken", pageToken), ("includeTrailingDelimiter", trailing ? "true" : nil),
            ("fields", api.listingFields(prefixes: true)),
        ])
        return try await api.send(HTTPRequest(method: .get, url: url, isIdempotent: true), object: nil)
    }

    private func parseListPage(_ response: HTTPResponse) throws -> StorageListResult {
        try StorageListResult(response: ListingDocument.of(response), listing: self, itemsCarryMetadata: api.dialect == .jsonAPI)
    }

    /// One page of at most `maxResults` (1–1000) objects whose names start
    /// with this reference's path and `/` (every object, at the root),
    /// however deep: a listing without delimiter, so a whole subtree takes
    /// one paged listing instead of one listing per directory. With
    /// `startOffset`/`endOffset`, only names in [startOffset, endOffset)
    /// (the JSON API's parameters; a server may ignore them).
    public func listObjects(
        maxResults: Int64, pageToken: String?, startOffset: String? = nil, endOffset: String? = nil
    ) async throws -> StorageObjectPage {
        guard api.dialect == .jsonAPI else {
            throw StorageError.invalidArgument("listings without delimiter need the Cloud Storage JSON API")
        }
        guard (1...1000).contains(maxResults) else {
            throw StorageError.invalidArgument("maxResults must be between 1 and 1000, not \(maxResults)")
        }
        let prefix = path.isRoot ? nil : fullPath + "/"
        let url = api.listURL([
            ("prefix", prefix), ("maxResults", String(maxResults)), ("pageToken", pageToken),
            ("startOffset", startOffset), ("endOffset", endOffset), ("fields", api.listingFields(prefixes: false)),
        ])
        let response = try await api.send(HTTPRequest(method: .get, url: url, isIdempotent: true), object: nil)
        return try StorageObjectPage(response: ListingDocument.of(response))
    }

    /// Server-side copy of this object to `destination` in the same bucket
    /// (the JSON API's rewrite, looping on its rewriteToken until done).
    /// Content type and custom metadata travel with the object.
    /// `ifGenerationMatch` guards the destination (0: only if absent),
    /// `ifSourceGenerationMatch` the source. Firebase (v0) has no
    /// server-side copy: there the bytes go through this process
    /// (`copyThroughClient`, with what that loses).
    @discardableResult
    public func copy(
        to destination: StorageReference, ifGenerationMatch: Int64? = nil, ifSourceGenerationMatch: Int64? = nil
    ) async throws -> StorageMetadata {
        try path.validateForObject()
        try destination.path.validateForObject()
        if api.dialect == .firebase {
            return try await copyThroughClient(
                to: destination, ifGenerationMatch: ifGenerationMatch, ifSourceGenerationMatch: ifSourceGenerationMatch)
        }
        var token: String?
        let guarded = ifGenerationMatch != nil
        while true {
            let url = api.rewriteURL(from: fullPath, to: destination.fullPath, [
                ("ifGenerationMatch", ifGenerationMatch.map(String.init)),
                ("ifSourceGenerationMatch", ifSourceGenerationMatch.map(String.init)),
                ("rewriteToken", token),
            ])
            let request = HTTPRequest(
                method: .post, url: url, headers: ["Content-Type": "application/json"],
                body: .bytes(Data("{}".utf8)), isIdempotent: guarded)
            let json = try ObjectAPI.json(await api.send(request, object: fullPath))
            if (json["done"] as? Bool) == true, let resource = json["resource"] as? [String: Any] {
                return try StorageMetadata(resource: resource)
            }
            guard let next = json["rewriteToken"] as? String else {
                throw StorageError.unknown(message: "rewrite neither finished nor returned a rewriteToken", response: nil)
            }
            token = next
        }
    }
}
