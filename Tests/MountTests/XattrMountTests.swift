import CXattr
import Foundation
import TestServerClient
import TestSupport
import Testing
import Transport
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// Object metadata as extended attributes, through setfattr, getfattr,
    /// cp --preserve=xattr, rsync -X and the syscalls themselves, checked
    /// through the server's API.
    @Suite struct Xattrs {
        static let getfattr = "/usr/bin/getfattr"
        static let setfattr = "/usr/bin/setfattr"

        @Test("setfattr, getfattr, getfattr -d and setfattr -x on a file")
        func fileAttributes() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("xattr-file")
            let object = "\(prefix)/f.txt"
            try await gcs.put(object, Data("hello\n".utf8), metadata: [
                "location": "Yosemite, CA, USA", "goog-reserved-posix-mode": "600", "goog-reserved-file-mtime": "1500000000",
            ])
            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { mount.cleanup() }
            let f = mount.at("f.txt")

            #expect(try await Self.dump(f) == ["user.location": "\"Yosemite, CA, USA\""], "reserved keys are not listed")
            try await Self.set(f, "user.colour", "blue")
            #expect(try await Self.metadata(gcs, object) == [
                "location": "Yosemite, CA, USA", "colour": "blue", "goog-reserved-posix-mode": "600", "goog-reserved-file-mtime": "1500000000",
            ])
            #expect(try await Self.value(f, "user.colour") == "blue")
            try await Self.run(Self.setfattr, ["-x", "user.location", f])
            #expect(try await Self.metadata(gcs, object) == [
                "colour": "blue", "goog-reserved-posix-mode": "600", "goog-reserved-file-mtime": "1500000000",
            ])
            let city = "Zürich, 東京 🚀 \"quoted\""
            try await Self.set(f, "user.city", city)
            #expect(try await Self.metadata(gcs, object)["city"] == city)
            #expect(try await Self.value(f, "user.city") == city)
            #expect(try await Self.dump(f).keys.sorted() == ["user.city", "user.colour"])

            // Writable standard properties, under gcs.
            #expect(try await Self.value(f, "gcs.contentType") == "application/octet-stream")
            try await Self.set(f, "gcs.contentType", "text/markdown; charset=utf-8")
            try await Self.set(f, "gcs.cacheControl", "public, max-age=60")
            try await Self.set(f, "gcs.contentLanguage", "de")
            var resource = try await gcs.resource(object) ?? [:]
            #expect(resource["contentType"] as? String == "text/markdown; charset=utf-8")
            #expect(resource["cacheControl"] as? String == "public, max-age=60")
            #expect(resource["contentLanguage"] as? String == "de")
            try await Self.run(Self.setfattr, ["-x", "gcs.cacheControl", f])
            resource = try await gcs.resource(object) ?? [:]
            #expect(resource["cacheControl"] == nil, "removing a property deletes it")
            #expect(resource["contentLanguage"] as? String == "de")
            #expect(try await Self.value(f, "gcs.contentType") == "text/markdown; charset=utf-8")

            // Read-only properties match the server's resource.
            for (attribute, field) in [
                ("gcs.bucket", "bucket"), ("gcs.fullPath", "name"), ("gcs.size", "size"), ("gcs.generation", "generation"),
                ("gcs.metageneration", "metageneration"), ("gcs.md5Hash", "md5Hash"), ("gcs.crc32c", "crc32c"),
            ] {
                #expect(try await Self.value(f, attribute) == resource[field] as? String, "\(attribute)")
            }
            #expect(try await Self.value(f, "gcs.name") == "f.txt")
            for attribute in ["gcs.timeCreated", "gcs.updated"] {
                let text = try await Self.value(f, attribute)
                #expect(text.hasSuffix("Z") && Self.rfc3339(text) != nil, "\(attribute): \(text)")
            }
            let updated = Self.rfc3339(try await Self.value(f, "gcs.updated"))
            let serverUpdated = (resource["updated"] as? String).flatMap { Self.rfc3339($0) }
            #expect(updated != nil && serverUpdated != nil && abs(updated!.timeIntervalSince(serverUpdated!)) < 0.001)
        }

        @Test("directories: a placeholder carries the attributes; an implicit one gets a placeholder on setfattr")
        func directoryAttributes() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("xattr-dir")
            try await gcs.put("\(prefix)/d/", Data(), metadata: ["owner": "team-a", "goog-reserved-posix-mode": "755"])
            try await gcs.put("\(prefix)/d/inner", Data("i".utf8))
            try await gcs.put("\(prefix)/implicit/x", Data("x".utf8))
            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { mount.cleanup() }

            let d = mount.at("d")
            #expect(try await Self.dump(d) == ["user.owner": "\"team-a\""])
            // The first PATCH also stores the mtime the placeholder showed,
            // its `updated` (semantics.md#mtime-stored).
            let mtime = try #require(ObjectChecks.updatedSeconds(try await gcs.resource("\(prefix)/d/"))).description
            try await Self.set(d, "user.k", "v")
            try await Self.run(Self.setfattr, ["-x", "user.owner", d])
            #expect(try await Self.metadata(gcs, "\(prefix)/d/") == ["k": "v", "goog-reserved-posix-mode": "755", "goog-reserved-file-mtime": mtime])
            #expect(try await Self.value(d, "gcs.fullPath") == "\(prefix)/d/")
            #expect(try await Self.value(d, "gcs.name") == "d")

            let implicit = mount.at("implicit")
            #expect(try await Self.dump(implicit).isEmpty)
            #expect(try await gcs.resource("\(prefix)/implicit/") == nil)
            try await Self.set(implicit, "user.k", "v")
            let placeholder = try await gcs.resource("\(prefix)/implicit/")
            #expect(placeholder?["size"] as? String == "0")
            #expect(placeholder?["metadata"] as? [String: String] == ["k": "v"])
            #expect(try await Self.dump(implicit) == ["user.k": "\"v\""])
            let ls = try await Tools.run("/bin/ls", ["-A", implicit])
            #expect(ls.ok && ls.lines == ["x"], "still the same directory: \(ls.summary) \(ls.out)")
        }

        @Test("metadata written through the API shows up as user.* after the TTL")
        func apiChangesAfterTheTTL() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("xattr-ttl")
            let object = "\(prefix)/f"
            try await gcs.put(object, Data("f".utf8), metadata: ["a": "1"])
            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix, options: ["--stat-ttl", "1"])
            defer { mount.cleanup() }
            let f = mount.at("f")
            #expect(try await Self.dump(f) == ["user.a": "\"1\""])

            try await gcs.patchMetadata(object, ["metadata": ["a": NSNull(), "b": "2"], "contentType": "text/csv"])
            try await Task.sleep(for: .milliseconds(1500))
            #expect(try await Self.dump(f) == ["user.b": "\"2\""])
            #expect(try await Self.value(f, "gcs.contentType") == "text/csv")
        }

        @Test("cp --preserve=xattr and rsync -X out of the mount keep every user attribute")
        func copiesOutOfTheMount() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("xattr-out")
            try await gcs.put("\(prefix)/tree/a.txt", Data("a".utf8), metadata: ["one": "1", "two": "zwei", "goog-reserved-posix-mode": "644"])
            try await gcs.put("\(prefix)/tree/plain.bin", Data("p".utf8))
            try await gcs.put("\(prefix)/tree/sub/", Data(), metadata: ["kind": "placeholder"])
            try await gcs.put("\(prefix)/tree/sub/b.txt", Data("b".utf8), metadata: ["city": "Zürich", "spaces": "a b  c"])
            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { mount.cleanup() }
            let local = try Self.xattrCapableScratch()
            defer { Scratch.remove(local) }

            let inMount = try await Self.dumpTree(mount.at("tree"))
            #expect(inMount.mapValues { $0.keys.sorted() } == [
                "a.txt": ["user.one", "user.two"], "sub": ["user.kind"], "sub/b.txt": ["user.city", "user.spaces"],
            ])
            #expect(inMount["a.txt"]?["user.two"] == "\"zwei\"" && inMount["sub/b.txt"]?["user.spaces"] == "\"a b  c\"")
            #expect(try await Self.value(mount.at("tree/sub/b.txt"), "user.city") == "Zürich")
            try await Self.run("/bin/cp", ["-r", "--preserve=xattr", mount.at("tree"), local + "/cp"])
            #expect(try await Self.dumpTree(local + "/cp") == inMount)
            try await Self.run("/usr/bin/rsync", ["-rX", mount.at("tree") + "/", local + "/rsync/"])
            #expect(try await Self.dumpTree(local + "/rsync") == inMount)
        }

        @Test("cp --preserve=xattr into the mount and back out")
        func cpPreserveXattrIntoTheMountAndBack() async throws {
            let prefix = MountEnv.uniquePrefix("xattr-cp-in")
            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { mount.cleanup() }
            let local = try Self.xattrCapableScratch()
            defer { Scratch.remove(local) }
            let source = try Self.makeSourceTree(in: local)
            let expected = try await Self.dumpTree(source)

            try await Self.run("/bin/cp", ["-r", "--preserve=xattr", source, mount.at("copy")])
            try await Self.expectStored(prefix: prefix + "/copy", expected)
            #expect(try await Self.dumpTree(mount.at("copy")) == expected)
            try await Self.run("/bin/cp", ["-r", "--preserve=xattr", mount.at("copy"), local + "/back"])
            #expect(try await Self.dumpTree(local + "/back") == expected)
        }

        @Test("rsync -X into the mount and back out")
        func rsyncXIntoTheMountAndBack() async throws {
            let prefix = MountEnv.uniquePrefix("xattr-rsync-in")
            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { mount.cleanup() }
            let local = try Self.xattrCapableScratch()
            defer { Scratch.remove(local) }
            let source = try Self.makeSourceTree(in: local)
            let expected = try await Self.dumpTree(source)

            try await Self.run("/usr/bin/rsync", ["-rX", source + "/", mount.at("copy") + "/"])
            try await Self.expectStored(prefix: prefix + "/copy", expected)
            #expect(try await Self.dumpTree(mount.at("copy")) == expected)
            try await Self.run("/usr/bin/rsync", ["-rX", mount.at("copy") + "/", local + "/back/"])
            #expect(try await Self.dumpTree(local + "/back") == expected)
        }

        @Test("errors by errno, from the syscalls themselves")
        func errnos() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("xattr-errno")
            let object = "\(prefix)/f"
            let original = ["a": "1", "goog-reserved-posix-mode": "600", "big": String(repeating: "x", count: 4096)]
            try await gcs.put(object, Data("f".utf8), metadata: original)
            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { mount.cleanup() }
            let f = mount.at("f")
            #expect(try await Self.dump(f).keys.sorted() == ["user.a", "user.big"])  // the mount now holds the metadata

            let log = try RequestLog.mark()
            // Reads: size queries, a buffer too small, missing names.
            #expect(Xattr.get(f, "user.a", size: 0) == .success(Data(count: 1)), "a size query answers the length")
            #expect(Xattr.get(f, "user.big", size: 100) == .failure(ERANGE))
            #expect(Xattr.get(f, "user.a", size: 64) == .success(Data("1".utf8)))
            #expect(Xattr.get(f, "user.missing") == .failure(ENODATA))
            #expect(Xattr.get(f, "user.goog-reserved-posix-mode") == .failure(ENODATA))
            #expect(Xattr.get(f, "gcs.nope") == .failure(ENODATA))
            #expect(Xattr.list(f, size: 0) == .success(Data(count: "user.a\0user.big\0".utf8.count)))
            #expect(Xattr.list(f, size: 3) == .failure(ERANGE))
            #expect(Xattr.list(f) == .success(Data("user.a\0user.big\0".utf8)))
            // Other namespaces, with no request.
            #expect(Xattr.get(f, "security.selinux") == .failure(EOPNOTSUPP))
            #expect(Xattr.get(f, "system.posix_acl_access") == .failure(EOPNOTSUPP))
            #expect(Xattr.get(f, "trusted.x") == .failure(EOPNOTSUPP))
            #expect(Xattr.set(f, "security.x", Data("1".utf8)) == EOPNOTSUPP)
            #expect(Xattr.set(f, "trusted.x", Data("1".utf8)) == EOPNOTSUPP)
            #expect(Xattr.remove(f, "security.x") == EOPNOTSUPP)
            // Refused changes.
            #expect(Xattr.set(f, "user.a", Data("2".utf8), flags: Int32(XATTR_CREATE)) == EEXIST)
            #expect(Xattr.set(f, "user.b", Data("2".utf8), flags: Int32(XATTR_REPLACE)) == ENODATA)
            #expect(Xattr.remove(f, "user.missing") == ENODATA)
            #expect(Xattr.set(f, "gcs.size", Data("1".utf8)) == EPERM)
            #expect(Xattr.remove(f, "gcs.generation") == EPERM)
            #expect(Xattr.set(f, "user.goog-reserved-posix-mode", Data("777".utf8)) == EPERM)
            #expect(Xattr.remove(f, "user.goog-reserved-posix-mode") == EPERM)
            #expect(Xattr.set(f, "gcs.nope", Data("1".utf8)) == EOPNOTSUPP)
            #expect(Xattr.set(f, "user.bytes", Data([0x66, 0xFF, 0xFE])) == EINVAL, "not UTF-8")
            #expect(Xattr.set(f, "user.nul", Data([0x61, 0x00, 0x62])) == EINVAL)
            #expect(Xattr.set(f, "user.long", Data(repeating: 0x61, count: 4097)) == E2BIG)
            // 1 + 1 + 24 + 3 + 3 + 4,096 bytes there; 4,100 more exceed 8 KiB in total.
            #expect(Xattr.set(f, "user.more", Data(repeating: 0x62, count: 4096)) == E2BIG)
            let requests = try log.entries().filter { $0.objectName == object }
            #expect(requests.isEmpty, "refused and foreign-namespace calls asked the server: \(requests)")
            #expect(try await Self.metadata(gcs, object) == original)

            // What is allowed goes through, with its flags; the first change
            // also keeps the mtime, the object's `updated`.
            let mtime = try #require(ObjectChecks.updatedSeconds(try await gcs.resource(object))).description
            #expect(Xattr.set(f, "user.a", Data("2".utf8), flags: Int32(XATTR_REPLACE)) == 0)
            #expect(Xattr.set(f, "user.b", Data("3".utf8), flags: Int32(XATTR_CREATE)) == 0)
            #expect(Xattr.set(f, "user.empty", Data()) == 0)
            #expect(Xattr.get(f, "user.empty") == .success(Data()))
            #expect(Xattr.remove(f, "user.big") == 0)
            #expect(try await Self.metadata(gcs, object) == ["a": "2", "b": "3", "empty": "", "goog-reserved-posix-mode": "600", "goog-reserved-file-mtime": mtime])
        }

        @Test("getfattr -d over 200 freshly listed files makes no request")
        func dumpAfterListingAsksNothing() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("xattr-count")
            let count = 200
            try await withThrowingTaskGroup(of: Void.self) { group in
                for start in stride(from: 0, to: count, by: count / 8) {
                    group.addTask {
                        for i in start..<min(count, start + count / 8) {
                            try await gcs.put(String(format: "\(prefix)/dir/f%03d", i), Data("\(i)".utf8), metadata: ["i": "\(i)", "even": "\(i % 2 == 0)"])
                        }
                    }
                }
                try await group.waitForAll()
            }
            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { mount.cleanup() }

            let ls = try await Tools.run("/bin/ls", ["-l", mount.at("dir")])
            #expect(ls.ok && ls.lines.count == count + 1, "\(ls.summary)")
            let log = try RequestLog.mark()
            let paths = (0..<count).map { mount.at(String(format: "dir/f%03d", $0)) }
            let dump = try await Self.run(Self.getfattr, ["-d", "--absolute-names"] + paths)
            let requests = try log.entries().filter { $0.decodedPath.contains(prefix) || ($0.parameter("prefix") ?? "").hasPrefix(prefix) }
            let files = Self.parseDump(dump.out)
            #expect(files.count == count)
            for i in 0..<count {
                #expect(files[paths[i]] == ["user.even": "\"\(i % 2 == 0)\"", "user.i": "\"\(i)\""], "\(paths[i])")
            }
            #expect(requests.isEmpty, "getfattr -d made \(requests.count) requests, e.g. \(requests.prefix(5))")
        }

        @Test("a change that loses a race retries once with fresh metadata (412 from the fake server)")
        func lostRaceRetriesOnce() async throws {
            let gcs = try DirectGCS.fake(bucket: "mounttests")
            let prefix = MountEnv.uniquePrefix("xattr-race")
            let object = "\(prefix)/f"
            try await gcs.put(object, Data("f".utf8), metadata: ["a": "1"])
            let mount = try await Mount.start(endpoint: try MountEnv.fake(), bucket: gcs.bucket, prefix: prefix)
            defer { mount.cleanup() }
            let f = mount.at("f")
            #expect(try await Self.dump(f) == ["user.a": "\"1\""])  // metageneration 1 is now in the mount's cache

            try await gcs.patchMetadata(object, ["metadata": ["theirs": "t"]])  // metageneration 2
            // The PATCH that lands keeps the mtime of what it landed on.
            let mtime = try #require(ObjectChecks.updatedSeconds(try await gcs.resource(object))).description
            let before = try await gcs.requests().count
            try await Self.set(f, "user.mine", "m")
            let mine = try await gcs.requests().dropFirst(before).filter { $0.objectName == object }
            #expect(mine.map(\.method) == ["PATCH", "GET", "PATCH"], "\(mine)")
            let patches = mine.filter { $0.method == "PATCH" }
            #expect(patches.map { $0.parameter("ifMetagenerationMatch") } == ["1", "2"], "\(mine)")
            #expect(try await Self.metadata(gcs, object) == ["a": "1", "theirs": "t", "mine": "m", "goog-reserved-file-mtime": mtime])
        }

        // MARK: - Tools

        /// Runs a tool and requires success.
        @discardableResult
        static func run(_ tool: String, _ arguments: [String]) async throws -> ToolResult {
            let result = try await Tools.run(tool, arguments)
            guard result.ok else { throw HarnessError(result.summary) }
            return result
        }

        static func set(_ path: String, _ name: String, _ value: String) async throws {
            try await run(setfattr, ["-n", name, "-v", value, path])
        }

        /// One attribute's value, raw.
        static func value(_ path: String, _ name: String) async throws -> String {
            try await run(getfattr, ["--only-values", "-n", name, path]).out
        }

        /// `getfattr -d` of one path: name → value as getfattr prints it.
        static func dump(_ path: String) async throws -> [String: String] {
            parseDump(try await run(getfattr, ["-d", "--absolute-names", path]).out)[path] ?? [:]
        }

        /// `getfattr -R -d` below `root`: relative path → (name → value).
        /// The root itself is left out (its name differs between copies).
        static func dumpTree(_ root: String) async throws -> [String: [String: String]] {
            let dump = try await run(getfattr, ["-R", "-d", "--absolute-names", root])
            var tree: [String: [String: String]] = [:]
            for (path, attributes) in parseDump(dump.out) where path.hasPrefix(root + "/") {
                tree[String(path.dropFirst(root.count + 1))] = attributes
            }
            return tree
        }

        /// Parses getfattr's "# file: PATH" blocks of `name="value"` lines.
        static func parseDump(_ text: String) -> [String: [String: String]] {
            var result: [String: [String: String]] = [:]
            var current: String?
            for line in text.split(separator: "\n") {
                if line.hasPrefix("# file: ") {
                    current = String(line.dropFirst("# file: ".count))
                    result[current!] = result[current!] ?? [:]
                } else if let current {
                    let equals = line.firstIndex(of: "=") ?? line.endIndex
                    result[current]![String(line[..<equals])] = equals == line.endIndex ? "" : String(line[line.index(after: equals)...])
                }
            }
            return result
        }

        static func metadata(_ gcs: DirectGCS, _ object: String) async throws -> [String: String] {
            guard let resource = try await gcs.resource(object) else { throw HarnessError("\(object) is not in the bucket") }
            return resource["metadata"] as? [String: String] ?? [:]
        }

        static func rfc3339(_ text: String) -> Date? {
            try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        }

        /// A scratch directory on a filesystem with user xattrs: the system
        /// temporary directory if it has them, else one under the repo's
        /// .build. Neither: the test fails (it is never skipped).
        static func xattrCapableScratch() throws -> String {
            let temporary = try Scratch.directory()
            if Xattr.supportsUserAttributes(temporary) { return temporary }
            Scratch.remove(temporary)
            let underBuild = try MountEnv.repo() + "/.build/xattr-scratch/" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: underBuild, withIntermediateDirectories: true)
            guard Xattr.supportsUserAttributes(underBuild) else {
                Scratch.remove(underBuild)
                throw HarnessError("neither \(NSTemporaryDirectory()) nor .build supports user xattrs")
            }
            return underBuild
        }

        /// A local tree with attributes of every kind the mount keeps:
        /// several keys, none, UTF-8, an empty value, a directory's own.
        static func makeSourceTree(in base: String) throws -> String {
            let source = base + "/source"
            try FileManager.default.createDirectory(atPath: source + "/sub", withIntermediateDirectories: true)
            let files: [(String, [String: String])] = [
                ("a.txt", ["user.one": "1", "user.two": "zwei"]),
                ("plain.bin", [:]),
                ("sub/b.txt", ["user.city": "Zürich", "user.empty": ""]),
            ]
            for (path, attributes) in files {
                try Data(path.utf8).write(to: URL(fileURLWithPath: source + "/" + path))
                for (name, value) in attributes where Xattr.set(source + "/" + path, name, Data(value.utf8)) != 0 {
                    throw HarnessError("setxattr \(name) on \(path): \(String(cString: strerror(errno)))")
                }
            }
            guard Xattr.set(source + "/sub", "user.kind", Data("directory".utf8)) == 0 else { throw HarnessError("setxattr on sub") }
            return source
        }

        /// Each file's (and directory's) attributes, as stored in the bucket
        /// under `prefix`.
        static func expectStored(prefix: String, _ expected: [String: [String: String]]) async throws {
            let gcs = try DirectGCS.emulator()
            for (path, attributes) in expected {
                var resource = try await gcs.resource("\(prefix)/\(path)")
                if resource == nil { resource = try await gcs.resource("\(prefix)/\(path)/") }
                let stored = (resource?["metadata"] as? [String: String] ?? [:])
                    .filter { !$0.key.hasPrefix("goog-reserved-") }
                    .mapValues { "\"\($0)\"" }
                let names = Dictionary(uniqueKeysWithValues: stored.map { ("user." + $0.key, $0.value) })
                #expect(Set(names.keys) == Set(attributes.keys), "\(path) in the bucket: \(stored)")
            }
        }
    }
}

/// The xattr syscalls, called directly for exact errnos.
enum Xattr {
    enum Outcome: Equatable {
        case success(Data)
        case failure(Int32)
    }

    /// getxattr with a buffer of `size` bytes (0: a size query, whose
    /// answer is given as that many zero bytes).
    static func get(_ path: String, _ name: String, size: Int = 65536) -> Outcome {
        var buffer = Data(count: size)
        let n = buffer.withUnsafeMutableBytes { getxattr(path, name, size == 0 ? nil : $0.baseAddress, size) }
        guard n >= 0 else { return .failure(errno) }
        return .success(size == 0 ? Data(count: n) : buffer.prefix(n))
    }

    static func list(_ path: String, size: Int = 65536) -> Outcome {
        var buffer = Data(count: size)
        let n = buffer.withUnsafeMutableBytes {
            listxattr(path, size == 0 ? nil : $0.baseAddress?.assumingMemoryBound(to: CChar.self), size)
        }
        guard n >= 0 else { return .failure(errno) }
        return .success(size == 0 ? Data(count: n) : buffer.prefix(n))
    }

    /// 0 or the errno.
    static func set(_ path: String, _ name: String, _ value: Data, flags: Int32 = 0) -> Int32 {
        let rc = value.withUnsafeBytes { setxattr(path, name, $0.baseAddress, value.count, flags) }
        return rc == 0 ? 0 : errno
    }

    static func remove(_ path: String, _ name: String) -> Int32 {
        removexattr(path, name) == 0 ? 0 : errno
    }

    static func supportsUserAttributes(_ directory: String) -> Bool {
        let probe = directory + "/.xattr-probe"
        guard FileManager.default.createFile(atPath: probe, contents: Data()) else { return false }
        defer { try? FileManager.default.removeItem(atPath: probe) }
        return set(probe, "user.probe", Data("1".utf8)) == 0
    }
}

extension DirectGCS {
    /// PATCH of the object resource (JSON; NSNull deletes), as another
    /// client would change metadata behind the mount.
    func patchMetadata(_ name: String, _ body: [String: Any]) async throws {
        let response = try await Self.transport.send(HTTPRequest(
            method: .patch, url: objectURL(name), headers: ["Content-Type": "application/json"],
            body: .bytes(try JSONSerialization.data(withJSONObject: body)), isIdempotent: false))
        guard response.status == 200 else {
            throw HarnessError("PATCH \(name) answered \(response.status): \(String(decoding: response.body.prefix(500), as: UTF8.self))")
        }
    }
}
