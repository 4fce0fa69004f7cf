import Foundation
import TestServerClient
import Testing

extension MountTests.FakeGCSServer {
    /// docs/semantics.md#shows-caching, against a server we did not write:
    /// `ls` of a directory of three pages, whose entries readdir hands out
    /// page by page while the later pages arrive. fake-gcs-server pages
    /// its items and sends every prefix at or after the page token with
    /// each page (ListObjectsWithOptionsPaginated, fakestorage/object.go,
    /// v1.54.0; GCS lists each prefix once), so the subdirectories come
    /// on every page, before names that sort ahead of them: each name
    /// must still be shown once, and the object `m` beside the directory
    /// `m/` (on the last page, after the directory) stays hidden.
    @Test("ls -la of 2,301 objects and two directories on three pages: each name once, the directory beside its namesake object wins", .timeLimit(.minutes(3)))
    func listingOfThreePagesShowsEachNameOnce() async throws {
        var objects: [(String, Data)] = (0..<2300).map { (String(format: "big/f%04d", $0), Data([UInt8($0 % 251)])) }
        objects += [("big/k/y", Data("y".utf8)), ("big/m/x", Data("x".utf8)), ("big/m", Data("hidden".utf8))]
        let gcs = try await DirectGCS.fakeGCSServer(newBucket: "mt-pages-\(UUID().uuidString.prefix(8).lowercased())")
        try await gcs.putAll(objects)
        let mount = try await Mount.start(endpoint: gcs.base, bucket: gcs.bucket, prefix: "")
        defer { mount.cleanup() }

        let expected = (0..<2300).map { String(format: "f%04d", $0) } + ["k", "m"]
        for round in ["cold", "warm"] {
            let ls = try await Tools.run("/bin/ls", ["-la", "--time-style=+%s", mount.at("big")])
            #expect(ls.ok, "\(round): \(ls.summary)\nlog:\n\(mount.logTail())")
            let entries = MountTests.Listing.parseLong(ls.lines).filter { $0.name != "." && $0.name != ".." }
            #expect(entries.map(\.name) == expected, "\(round): \(entries.count) entries, \(Set(entries.map(\.name)).count) names")
            #expect(entries.filter { $0.type == "d" }.map(\.name) == ["k", "m"], "\(round)")
            #expect(entries.first { $0.name == "f0250" }?.size == 1, "\(round)")
        }
        let inside = try await Tools.run("/bin/ls", ["-A", mount.at("big/m")])
        #expect(inside.ok && inside.lines == ["x"], "\(inside.summary) \(inside.out)")
        // The hidden object is still there, untouched.
        #expect(try await gcs.resource("big/m") != nil)
    }
}
