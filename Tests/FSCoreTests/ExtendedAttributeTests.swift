import Foundation
import Testing
@testable import FSCore

@Suite("getxattr, listxattr, setxattr, removexattr over the in-memory store")
struct ExtendedAttributeTests {
    static let create = ExtendedAttributeRules.createFlag
    let mtimeKey = AttributeMapper.mtimeKey

    /// A time as a PATCH keeps an object's mtime: whole seconds.
    static func seconds(_ date: Date) -> String { String(Timestamp(date).seconds) }
    static let replace = ExtendedAttributeRules.replaceFlag

    func text(_ data: Data) -> String { String(decoding: data, as: UTF8.self) }

    @Test func readsAfterAListingAskNothing() async throws {
        let h = try Harness()
        for i in 0..<5 {
            h.store.seed("d/f\(i)", bytes(10 + i), contentType: "text/plain",
                         customMetadata: ["n": "\(i)", "goog-reserved-posix-mode": "600"])
        }
        let d = try await h.lookup("d")
        let names = try await h.list(d.attributes.inode).map(\.name).filter { $0.hasPrefix("f") }
        #expect(names.count == 5)
        h.store.resetCounters()
        for name in names {
            let entry = try await h.lookup("d/\(name)")
            let inode = entry.attributes.inode
            #expect(try await h.fs.listxattr(inode) == ["user.n"])
            #expect(text(try await h.fs.getxattr(inode, name: "user.n")) == String(name.dropFirst()))
            #expect(text(try await h.fs.getxattr(inode, name: "gcs.contentType")) == "text/plain")
            #expect(text(try await h.fs.getxattr(inode, name: "gcs.size")) == "\(entry.attributes.size)")
            #expect(text(try await h.fs.getxattr(inode, name: "gcs.bucket")) == "in-memory")
            await expectErrno(ENODATA) { _ = try await h.fs.getxattr(inode, name: "user.goog-reserved-posix-mode") }
            await expectErrno(ENODATA) { _ = try await h.fs.getxattr(inode, name: "user.missing") }
        }
        #expect(h.store.totalRequests == 0, "\(h.store.requestCounts)")
    }

    @Test func staleMetadataIsStatOnceThenCached() async throws {
        let h = try Harness()
        h.store.seed("f", customMetadata: ["a": "1"])
        let f = try await h.lookup("f").attributes.inode
        _ = try await h.store.patch("f", { var p = MetadataPatch(); p.customMetadata["b"] = "2"; return p }(), ifMetagenerationMatch: nil)
        #expect(try await h.fs.listxattr(f) == ["user.a"], "within the TTL the mount's view stands")
        h.clock.advance(by: .seconds(61))
        h.store.resetCounters()
        #expect(try await h.fs.listxattr(f) == ["user.a", "user.b"])
        #expect(text(try await h.fs.getxattr(f, name: "user.b")) == "2")
        #expect(h.store.requestCounts == [.stat: 1])
    }

    @Test func setAndRemoveAreOnePatchEach() async throws {
        let h = try Harness()
        let seeded = h.store.seed("d/f", customMetadata: ["keep": "k", "old": "o"])
        let d = try await h.lookup("d").attributes.inode
        _ = try await h.list(d)
        let f = try await h.lookup("d/f").attributes.inode
        h.store.resetCounters()

        try await h.fs.setxattr(f, name: "user.location", value: Data("Yosemite, CA, USA".utf8), flags: 0)
        try await h.fs.removexattr(f, name: "user.old")
        try await h.fs.setxattr(f, name: "gcs.contentType", value: Data("text/markdown".utf8), flags: 0)
        try await h.fs.setxattr(f, name: "gcs.cacheControl", value: Data("no-store".utf8), flags: 0)
        try await h.fs.removexattr(f, name: "gcs.cacheControl")
        #expect(h.store.requestCounts == [.patch: 5], "one PATCH per change, no stat")

        let stored = try await h.store.stat("d/f")
        // The first PATCH also kept the mtime, which was the seeded object's
        // `updated` (ObjectMetadataWriter.keepingModificationTime).
        #expect(stored.customMetadata == ["keep": "k", "location": "Yosemite, CA, USA", mtimeKey: Self.seconds(seeded.updated)])
        #expect(stored.contentType == "text/markdown")
        #expect(stored.cacheControl == nil)
        #expect(stored.metageneration == 6)

        // The mount's view follows its own changes, also through a cached
        // listing that a new opendir reuses.
        _ = try await h.list(d)
        h.store.resetCounters()
        #expect(try await h.fs.listxattr(f) == ["user.keep", "user.location"])
        #expect(text(try await h.fs.getxattr(f, name: "gcs.contentType")) == "text/markdown")
        #expect(text(try await h.fs.getxattr(f, name: "gcs.metageneration")) == "6")
        await expectErrno(ENODATA) { _ = try await h.fs.getxattr(f, name: "gcs.cacheControl") }
        #expect(h.store.totalRequests == 0)
    }

    @Test func flagsAndMissingAttributesAskNoPatch() async throws {
        let h = try Harness()
        let seeded = h.store.seed("f", customMetadata: ["a": "1"])
        let f = try await h.lookup("f").attributes.inode
        h.store.resetCounters()
        await expectErrno(EEXIST) { try await h.fs.setxattr(f, name: "user.a", value: Data("2".utf8), flags: Self.create) }
        await expectErrno(ENODATA) { try await h.fs.setxattr(f, name: "user.b", value: Data("2".utf8), flags: Self.replace) }
        await expectErrno(ENODATA) { try await h.fs.removexattr(f, name: "user.b") }
        await expectErrno(ENODATA) { try await h.fs.removexattr(f, name: "gcs.contentLanguage") }
        await expectErrno(EEXIST) { try await h.fs.setxattr(f, name: "gcs.contentType", value: Data("x/y".utf8), flags: Self.create) }
        #expect(h.store.totalRequests == 0)
        try await h.fs.setxattr(f, name: "user.a", value: Data("3".utf8), flags: Self.replace)
        try await h.fs.setxattr(f, name: "user.b", value: Data("4".utf8), flags: Self.create)
        #expect(try await h.store.stat("f").customMetadata == ["a": "3", "b": "4", mtimeKey: Self.seconds(seeded.updated)])
    }

    @Test func refusedChangesAskNothing() async throws {
        let h = try Harness()
        h.store.seed("f", customMetadata: ["goog-reserved-posix-mode": "600", "big": String(repeating: "x", count: 4096)])
        let f = try await h.lookup("f").attributes.inode
        h.store.resetCounters()
        await expectErrno(EPERM) { try await h.fs.setxattr(f, name: "gcs.size", value: Data("1".utf8), flags: 0) }
        await expectErrno(EPERM) { try await h.fs.removexattr(f, name: "gcs.generation") }
        await expectErrno(EPERM) { try await h.fs.setxattr(f, name: "user.goog-reserved-posix-mode", value: Data("777".utf8), flags: 0) }
        await expectErrno(EPERM) { try await h.fs.removexattr(f, name: "user.goog-reserved-posix-mode") }
        await expectErrno(EPERM) { try await h.fs.setxattr(f, name: "user.goog-reserved-new", value: Data("1".utf8), flags: 0) }
        await expectErrno(EOPNOTSUPP) { try await h.fs.setxattr(f, name: "security.selinux", value: Data("x".utf8), flags: 0) }
        await expectErrno(EOPNOTSUPP) { _ = try await h.fs.getxattr(f, name: "system.posix_acl_access") }
        await expectErrno(EOPNOTSUPP) { try await h.fs.removexattr(f, name: "trusted.x") }
        await expectErrno(EOPNOTSUPP) { try await h.fs.setxattr(f, name: "gcs.nope", value: Data("1".utf8), flags: 0) }
        await expectErrno(EINVAL) { try await h.fs.setxattr(f, name: "user.k", value: Data([0xFF, 0xFE]), flags: 0) }
        await expectErrno(EINVAL) { try await h.fs.setxattr(f, name: "user.", value: Data("1".utf8), flags: 0) }
        await expectErrno(E2BIG) { try await h.fs.setxattr(f, name: "user.k", value: Data(repeating: 0x61, count: 4097), flags: 0) }
        // 24 + 3 + 3 + 4,096 bytes there already; 4,100 more go over 8 KiB.
        await expectErrno(E2BIG) { try await h.fs.setxattr(f, name: "user.more", value: Data(repeating: 0x62, count: 4096), flags: 0) }
        #expect(h.store.totalRequests == 0, "\(h.store.requestCounts)")
        try await h.fs.setxattr(f, name: "user.more", value: Data(repeating: 0x62, count: 4000), flags: 0)
        #expect(h.store.requestCounts == [.patch: 1])
    }

    @Test func aLostRaceRetriesOnceWithFreshMetadata() async throws {
        let h = try Harness()
        h.store.seed("f", customMetadata: ["a": "1"])
        let f = try await h.lookup("f").attributes.inode
        // Someone else adds a key after the mount read the object.
        var other = MetadataPatch()
        other.customMetadata["theirs"] = "t"
        let changed = try await h.store.patch("f", other, ifMetagenerationMatch: nil)
        h.store.resetCounters()

        try await h.fs.setxattr(f, name: "user.mine", value: Data("m".utf8), flags: 0)
        #expect(h.store.requestCounts == [.patch: 2, .stat: 1], "412, a fresh stat, then the PATCH that lands")
        #expect(try await h.store.stat("f").customMetadata == ["a": "1", "theirs": "t", "mine": "m", mtimeKey: Self.seconds(changed.updated)],
                "the mtime kept is the one of the object the PATCH landed on")
        #expect(try await h.fs.listxattr(f) == ["user.a", "user.mine", "user.theirs"])

        // XATTR_CREATE is judged against what is really there after the race.
        var theirs = MetadataPatch()
        theirs.customMetadata["contested"] = "first"
        _ = try await h.store.patch("f", theirs, ifMetagenerationMatch: nil)
        await expectErrno(EEXIST) { try await h.fs.setxattr(f, name: "user.contested", value: Data("second".utf8), flags: Self.create) }
        #expect(try await h.store.stat("f").customMetadata["contested"] == "first")
    }

    @Test func losingTwiceIsEAGAINAndADeletedObjectENOENT() async throws {
        let h = try Harness()
        h.store.seed("f")
        let f = try await h.lookup("f").attributes.inode
        h.store.failNext(2, with: .preconditionFailed("f"), operations: [.patch])
        h.store.resetCounters()
        await expectErrno(EAGAIN) { try await h.fs.setxattr(f, name: "user.k", value: Data("v".utf8), flags: 0) }
        #expect(h.store.requestCounts == [.patch: 2, .stat: 1])

        try await h.store.delete("f", ifGenerationMatch: nil)
        await expectErrno(ENOENT) { try await h.fs.setxattr(f, name: "user.k", value: Data("v".utf8), flags: 0) }
        h.clock.advance(by: .seconds(61))
        await expectErrno(ENOENT) { _ = try await h.fs.listxattr(f) }
    }

    @Test func storeFailuresKeepTheirErrno() async throws {
        let h = try Harness()
        h.store.seed("f")
        let f = try await h.lookup("f").attributes.inode
        h.store.failNext(1, with: .permissionDenied("no"), operations: [.patch])
        await expectErrno(EACCES) { try await h.fs.setxattr(f, name: "user.k", value: Data("v".utf8), flags: 0) }
        h.store.failNext(1, with: .unavailable("down"), operations: [.patch])
        await expectErrno(EIO) { try await h.fs.setxattr(f, name: "user.k", value: Data("v".utf8), flags: 0) }
    }

    @Test func placeholderDirectoriesCarryAttributes() async throws {
        let h = try Harness()
        let placeholder = h.store.seed("p/", customMetadata: ["colour": "green", "goog-reserved-posix-mode": "700"])
        h.store.seed("p/inside")
        let p = try await h.lookup("p").attributes.inode
        h.store.resetCounters()
        #expect(try await h.fs.listxattr(p) == ["user.colour"], "the lookup's probe read the placeholder")
        #expect(text(try await h.fs.getxattr(p, name: "gcs.fullPath")) == "p/")
        #expect(text(try await h.fs.getxattr(p, name: "gcs.name")) == "p")
        #expect(h.store.totalRequests == 0)
        try await h.fs.setxattr(p, name: "user.shape", value: Data("round".utf8), flags: 0)
        try await h.fs.removexattr(p, name: "user.colour")
        #expect(h.store.requestCounts == [.patch: 2])
        #expect(try await h.store.stat("p/").customMetadata == ["goog-reserved-posix-mode": "700", "shape": "round", mtimeKey: Self.seconds(placeholder.updated)])

        // A listing carries the placeholder's metadata too (the JSON API
        // returns it with includeTrailingDelimiter): no stat.
        let root = try await h.list(InodeTable.root)
        #expect(root.map(\.name).contains("p"))
        h.clock.advance(by: .seconds(61))
        _ = try await h.list(InodeTable.root)
        h.store.resetCounters()
        #expect(try await h.fs.listxattr(p) == ["user.shape"])
        #expect(try await h.fs.listxattr(p) == ["user.shape"])
        #expect(h.store.totalRequests == 0)
    }

    @Test func implicitDirectoriesListNothingAndGetAPlaceholderOnSet() async throws {
        let h = try Harness()
        h.store.seed("i/x")
        h.store.seed("j/y")
        let i = try await h.lookup("i").attributes.inode
        let j = try await h.lookup("j").attributes.inode
        #expect(try await h.fs.listxattr(i) == [])
        await expectErrno(ENODATA) { _ = try await h.fs.getxattr(i, name: "gcs.fullPath") }
        await expectErrno(ENODATA) { try await h.fs.removexattr(i, name: "user.k") }
        await expectErrno(ENODATA) { try await h.fs.setxattr(i, name: "user.k", value: Data("v".utf8), flags: Self.replace) }
        #expect(h.store.objectNames == ["i/x", "j/y"], "nothing created by refused changes")

        h.store.resetCounters()
        try await h.fs.setxattr(i, name: "user.k", value: Data("v".utf8), flags: Self.create)
        #expect(h.store.requestCounts == [.put: 1, .stat: 1], "stat finds no placeholder; one upload carries the key")
        let placeholder = try await h.store.stat("i/")
        #expect(placeholder.customMetadata == ["k": "v"] && placeholder.size == 0)
        h.store.resetCounters()
        #expect(try await h.fs.listxattr(i) == ["user.k"])
        #expect(h.store.totalRequests == 0)
        let again = try await h.lookup("i")
        #expect(again.attributes.inode == i, "still the same directory")

        // A property the upload cannot carry follows in one PATCH.
        try await h.fs.setxattr(j, name: "gcs.cacheControl", value: Data("no-cache".utf8), flags: 0)
        #expect(try await h.store.stat("j/").cacheControl == "no-cache")
    }

    @Test func aPlaceholderCreatedMeanwhileIsPatchedInstead() async throws {
        let h = try Harness()
        h.store.seed("i/x")
        let i = try await h.lookup("i").attributes.inode
        #expect(try await h.fs.listxattr(i) == [])
        // Another client creates the placeholder between our stat (made to
        // miss it) and our upload, whose ifGenerationMatch=0 then fails.
        let theirs = h.store.seed("i/", customMetadata: ["theirs": "t"])
        h.store.failNext(1, with: .notFound("i/"), operations: [.stat])
        h.store.resetCounters()
        try await h.fs.setxattr(i, name: "user.mine", value: Data("m".utf8), flags: 0)
        #expect(h.store.requestCounts == [.stat: 2, .put: 1, .patch: 1])
        #expect(try await h.store.stat("i/").customMetadata == ["theirs": "t", "mine": "m", mtimeKey: Self.seconds(theirs.updated)])
    }

    @Test func theBucketRootHasNoObjectButAPrefixRootHasItsPlaceholder() async throws {
        let whole = try Harness()
        #expect(try await whole.fs.listxattr(InodeTable.root) == [])
        await expectErrno(EOPNOTSUPP) { try await whole.fs.setxattr(InodeTable.root, name: "user.k", value: Data("v".utf8), flags: 0) }
        #expect(whole.store.totalRequests == 0)

        let prefixed = try Harness(options: MountOptions(uid: 1000, gid: 1000, prefix: "top"))
        let top = prefixed.store.seed("top/", customMetadata: ["k": "v"])
        #expect(try await prefixed.fs.listxattr(InodeTable.root) == ["user.k"])
        try await prefixed.fs.setxattr(InodeTable.root, name: "user.k2", value: Data("v2".utf8), flags: 0)
        #expect(try await prefixed.store.stat("top/").customMetadata == ["k": "v", "k2": "v2", mtimeKey: Self.seconds(top.updated)])
    }

    @Test func aReadOnlyMountRefusesChanges() async throws {
        let h = try Harness(options: MountOptions(uid: 1000, gid: 1000, readOnly: true))
        h.store.seed("f", customMetadata: ["a": "1"])
        let f = try await h.lookup("f").attributes.inode
        #expect(try await h.fs.listxattr(f) == ["user.a"])
        await expectErrno(EROFS) { try await h.fs.setxattr(f, name: "user.b", value: Data("2".utf8), flags: 0) }
        await expectErrno(EROFS) { try await h.fs.removexattr(f, name: "user.a") }
    }
}
