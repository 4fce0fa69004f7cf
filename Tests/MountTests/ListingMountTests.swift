import Foundation
import TestServerClient
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// Listings, attributes and names, through `ls`, `find`, `du` and `stat`.
    @Suite struct Listing {
        /// One `ls -la` line: type+mode, size, name.
        struct LsEntry: Equatable, CustomStringConvertible {
            let type: Character
            let permissions: String
            let size: Int64
            let name: String
            var description: String { "\(type)\(permissions) \(size) \(name)" }
        }

        /// Parses `ls -la --time-style=+%s` (no spaces in names).
        static func parseLong(_ lines: [String]) -> [LsEntry] {
            lines.compactMap { line in
                let f = line.split(separator: " ", omittingEmptySubsequences: true)
                guard f.count >= 7, let type = f[0].first, let size = Int64(f[4]) else { return nil }
                return LsEntry(type: type, permissions: String(f[0].dropFirst().prefix(9)), size: size,
                               name: f[6...].joined(separator: " "))
            }
        }

        @Test("ls -la of a small tree shows names, sizes and types")
        func lsSmallTree() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("ls")
            try await gcs.put("\(prefix)/hello.txt", Data("hello, world\n".utf8))
            try await gcs.put("\(prefix)/empty", Data())
            try await gcs.put("\(prefix)/docs/readme.md", MountEnv.pattern(100, seed: 1))
            try await gcs.put("\(prefix)/docs/img/pic.bin", MountEnv.pattern(4096, seed: 2))
            try await gcs.put("\(prefix)/zdir/", Data())

            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { mount.cleanup() }

            let root = try await Tools.run("/bin/ls", ["-la", "--time-style=+%s", mount.path])
            #expect(root.ok, "\(root.summary)")
            let entries = Self.parseLong(root.lines)
            #expect(entries.map(\.name) == [".", "..", "docs", "empty", "hello.txt", "zdir"], "ls -la: \(root.out)")
            let byName = Dictionary(entries.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
            #expect(byName["docs"]?.type == "d")
            #expect(byName["zdir"]?.type == "d")
            #expect(byName["."]?.type == "d")
            #expect(byName["hello.txt"] == LsEntry(type: "-", permissions: "rw-r--r--", size: 13, name: "hello.txt"))
            #expect(byName["empty"] == LsEntry(type: "-", permissions: "rw-r--r--", size: 0, name: "empty"))
            #expect(byName["docs"]?.permissions == "rwxr-xr-x")

            let docs = try await Tools.run("/bin/ls", ["-la", "--time-style=+%s", mount.at("docs")])
            #expect(docs.ok, "\(docs.summary)")
            let docEntries = Self.parseLong(docs.lines)
            #expect(docEntries.map(\.name) == [".", "..", "img", "readme.md"], "ls -la docs: \(docs.out)")
            #expect(docEntries.first { $0.name == "readme.md" }?.size == 100)
            #expect(docEntries.first { $0.name == "img" }?.type == "d")

            let img = try await Tools.run("/bin/ls", ["-la", "--time-style=+%s", mount.at("docs/img")])
            #expect(Self.parseLong(img.lines).filter { $0.name == "pic.bin" } ==
                    [LsEntry(type: "-", permissions: "rw-r--r--", size: 4096, name: "pic.bin")], "ls -la docs/img: \(img.out)")

            let zdir = try await Tools.run("/bin/ls", ["-A", mount.at("zdir")])
            #expect(zdir.ok && zdir.lines.isEmpty, "placeholder-only directory should be empty: \(zdir.summary) \(zdir.out)")
        }

        // Checks semantics.md#shows-caching
        @Test("ls -l of 2,000 objects: one listing, no per-object request")
        func lsLargeDirectory() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("big")
            let count = 2000
            var objects: [(String, Data)] = []
            var expected: [String: Int64] = [:]
            for i in 0..<count {
                let name = String(format: "f%04d.dat", i)
                let size = i % 13
                objects.append(("\(prefix)/big/\(name)", MountEnv.pattern(size, seed: UInt64(i))))
                expected[name] = Int64(size)
            }
            let uploadStart = ContinuousClock.now
            try await gcs.putAll(objects)
            let uploadTime = ContinuousClock.now - uploadStart

            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { mount.cleanup() }

            let log = try RequestLog.mark()
            let ls = try await Tools.run("/bin/ls", ["-l", "--time-style=+%s", mount.at("big")])
            #expect(ls.ok, "\(ls.summary)")
            var seen: [String: Int64] = [:]
            for entry in Self.parseLong(ls.lines) { seen[entry.name] = entry.size }
            #expect(seen.count == count, "ls -l listed \(seen.count) entries (upload took \(uploadTime))")
            #expect(seen == expected, "names or sizes differ; first differences: \(Array(Set(seen.keys).symmetricDifference(expected.keys)).sorted().prefix(5))")

            let requests = try log.entries()
            let lists = requests.filter { $0.isList(prefix: "\(prefix)/big/") }
            let perObject = requests.filter { $0.touchesObject(under: "\(prefix)/big/") }
            #expect((1...2).contains(lists.count), "expected 1-2 list requests for \(prefix)/big/, got \(lists.count); all requests: \(requests.prefix(20))")
            #expect(perObject.isEmpty, "ls -l made \(perObject.count) per-object requests, e.g. \(perObject.prefix(5))")
        }

        @Test("find lists a nested tree; du -sb sums the sizes")
        func findAndDu() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("find")
            let files: [String: Int] = [
                "a/b/c/d.txt": 1000, "a/b/e.txt": 17, "a/f.txt": 0, "g.txt": 65_536,
                "h/i/j/k/l.txt": 123_457, "m/n.bin": 1, "top": 4096,
            ]
            for (i, (path, size)) in files.sorted(by: { $0.key < $1.key }).enumerated() {
                try await gcs.put("\(prefix)/\(path)", MountEnv.pattern(size, seed: UInt64(100 + i)))
            }
            try await gcs.put("\(prefix)/empty-dir/", Data())

            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { mount.cleanup() }

            let find = try await Tools.run("/usr/bin/find", [mount.path])
            #expect(find.ok, "\(find.summary)")
            let found = Set(find.lines.map { String($0.dropFirst(mount.path.count)) }.map { $0.hasPrefix("/") ? String($0.dropFirst()) : $0 })
            let expected: Set<String> = [
                "", "a", "a/b", "a/b/c", "a/b/c/d.txt", "a/b/e.txt", "a/f.txt", "g.txt", "h", "h/i", "h/i/j",
                "h/i/j/k", "h/i/j/k/l.txt", "m", "m/n.bin", "top", "empty-dir",
            ]
            #expect(found == expected, "find: missing \(expected.subtracting(found).sorted()), extra \(found.subtracting(expected).sorted())")

            let findFiles = try await Tools.run("/usr/bin/find", [mount.path, "-type", "f"])
            #expect(findFiles.lines.count == files.count, "find -type f: \(findFiles.out)")
            let findDirs = try await Tools.run("/usr/bin/find", [mount.path, "-mindepth", "1", "-type", "d"])
            #expect(findDirs.lines.count == 9, "find -type d: \(findDirs.out)")

            let du = try await Tools.run("/usr/bin/du", ["-sb", mount.path])
            #expect(du.ok, "\(du.summary)")
            let total = du.out.split(whereSeparator: { $0 == "\t" || $0 == " " }).first.flatMap { Int($0) }
            #expect(total == files.values.reduce(0, +), "du -sb said \(du.out)")
        }

        // Checks semantics.md#shows-attributes
        @Test("stat shows size, default modes, and POSIX attributes from custom metadata")
        func statAttributes() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("stat")
            try await gcs.put("\(prefix)/plain.txt", MountEnv.pattern(777, seed: 3))
            try await gcs.put("\(prefix)/posix.txt", MountEnv.pattern(42, seed: 4), metadata: [
                "goog-reserved-file-mtime": "1600000000",
                "goog-reserved-posix-mode": "100600",
                "goog-reserved-posix-uid": "1234",
                "goog-reserved-posix-gid": "5678",
            ])
            try await gcs.put("\(prefix)/exec.sh", Data("#!/bin/sh\n".utf8), metadata: ["goog-reserved-posix-mode": "755"])
            try await gcs.put("\(prefix)/dir/inside", Data("x".utf8))
            let plainResource = try #require(try await gcs.resource("\(prefix)/plain.txt"))

            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { mount.cleanup() }

            func stat(_ name: String) async throws -> [String] {
                let r = try await Tools.run("/usr/bin/stat", ["-c", "%s|%a|%u|%g|%Y|%F", mount.at(name)])
                #expect(r.ok, "\(r.summary)")
                return r.out.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "|").map(String.init)
            }
            let me = (String(getuid()), String(getgid()))

            let plain = try await stat("plain.txt")
            #expect(plain.count == 6)
            if plain.count == 6 {
                #expect(plain[0] == "777")
                #expect(plain[1] == "644")
                #expect((plain[2], plain[3]) == me)
                #expect(plain[5] == "regular file")
                // No mtime metadata: the object's `updated` time.
                let updated = (plainResource["updated"] as? String).flatMap { text -> Date? in
                    let f = ISO8601DateFormatter()
                    f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
                    return f.date(from: text) ?? ISO8601DateFormatter().date(from: text)
                }
                let mtime = Double(plain[4])
                #expect(updated != nil && mtime != nil && abs(mtime! - updated!.timeIntervalSince1970) < 2,
                        "mtime \(plain[4]) vs updated \(plainResource["updated"] ?? "nil")")
            }

            let posix = try await stat("posix.txt")
            #expect(posix == ["42", "600", "1234", "5678", "1600000000", "regular file"], "stat posix.txt: \(posix)")

            let exec = try await stat("exec.sh")
            #expect(exec.count == 6 && exec[1] == "755" && exec[0] == "10", "stat exec.sh: \(exec)")

            let dir = try await stat("dir")
            #expect(dir.count == 6 && dir[1] == "755" && dir[5] == "directory" && (dir[2], dir[3]) == me, "stat dir: \(dir)")

            let root = try await stat("")
            #expect(root.count == 6 && root[1] == "755" && root[5] == "directory", "stat root: \(root)")
        }

        @Test("an object uploaded after mounting appears once the TTLs pass")
        func newObjectAppearsAfterTTL() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("ttl")
            try await gcs.put("\(prefix)/first.txt", Data("first\n".utf8))

            let mount = try await Mount.start(
                endpoint: try MountEnv.emulator(), prefix: prefix, options: ["--stat-ttl", "1", "--negative-ttl", "1"])
            defer { mount.cleanup() }

            let before = try await Tools.run("/bin/ls", ["-1", mount.path])
            #expect(before.lines == ["first.txt"], "\(before.summary) \(before.out)")
            let missing = try await Tools.run("/usr/bin/stat", [mount.at("late.txt")])
            #expect(!missing.ok && missing.stderr.contains("No such file"), "late.txt should not exist yet: \(missing.summary)")

            let content = Data("arrived late\n".utf8)
            try await gcs.put("\(prefix)/late.txt", content)
            try await Task.sleep(for: .milliseconds(2500))

            let after = try await Tools.run("/bin/ls", ["-1", mount.path])
            #expect(after.lines == ["first.txt", "late.txt"], "\(after.summary) \(after.out)")
            let present = try await Tools.run("/usr/bin/stat", ["-c", "%s", mount.at("late.txt")])
            #expect(present.ok && present.out.trimmingCharacters(in: .whitespacesAndNewlines) == "\(content.count)", "\(present.summary) \(present.out)")
            let cat = try await Tools.run("/bin/cat", [mount.at("late.txt")])
            #expect(cat.ok && cat.stdout == content, "\(cat.summary)")
        }

        @Test("names with spaces, unicode and # list and read correctly")
        func unusualNames() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("names")
            let files = [
                "with space.txt", "café.txt", "日本/語 #1.txt", "#hash", "a#b#c", "dir with space/inner file #.txt",
                "éé/日本.bin", "100% sure?.txt",
            ]
            var contents: [String: Data] = [:]
            for (i, name) in files.enumerated() {
                let data = Data("content of \(name) #\(i)\n".utf8)
                contents[name] = data
                try await gcs.put("\(prefix)/\(name)", data)
            }

            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { mount.cleanup() }

            let ls = try await Tools.run("/bin/ls", ["-1", "--quoting-style=literal", mount.path])
            #expect(ls.ok, "\(ls.summary)")
            let expectedTop = Set(files.map { $0.split(separator: "/").first.map(String.init)! })
            #expect(Set(ls.lines.map { Array($0.utf8) }) == Set(expectedTop.map { Array($0.utf8) }), "ls: \(ls.lines)")

            let find = try await Tools.run("/usr/bin/find", [mount.path, "-type", "f"])
            let found = Set(find.lines.map { String($0.dropFirst(mount.path.count + 1)) }.map { Array($0.utf8) })
            #expect(found == Set(files.map { Array($0.utf8) }), "find -type f: \(find.lines)")

            for name in files {
                let cat = try await Tools.run("/bin/cat", [mount.at(name)])
                #expect(cat.ok && cat.stdout == contents[name], "cat \(name): \(cat.summary)")
            }
        }

        // Checks semantics.md#shows-skipped-names
        @Test("the seeds' bucket: odd names become directories or are skipped")
        func seedsBucket() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("seeds")
            try await gcs.put("\(prefix)/correctPrefix/happyItem", Data("happy\n".utf8))
            try await gcs.put("\(prefix)/wrongPrefix//sadItem", Data("sad\n".utf8))
            try await gcs.put("\(prefix)/lonelyItem/", Data())

            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { mount.cleanup() }

            let root = try await Tools.run("/bin/ls", ["-la", "--time-style=+%s", mount.path])
            #expect(root.ok, "\(root.summary)")
            let entries = Self.parseLong(root.lines).filter { $0.name != "." && $0.name != ".." }
            #expect(entries.map(\.name) == ["correctPrefix", "lonelyItem", "wrongPrefix"], "root: \(root.out)")
            #expect(entries.allSatisfy { $0.type == "d" }, "all three should be directories: \(entries)")

            let correct = try await Tools.run("/bin/ls", ["-A", mount.at("correctPrefix")])
            #expect(correct.ok && correct.lines == ["happyItem"], "\(correct.summary) \(correct.out)")
            let happy = try await Tools.run("/bin/cat", [mount.at("correctPrefix/happyItem")])
            #expect(happy.ok && happy.out == "happy\n", "\(happy.summary)")

            for dir in ["wrongPrefix", "lonelyItem"] {
                let ls = try await Tools.run("/bin/ls", ["-A", mount.at(dir)])
                #expect(ls.ok && ls.lines.isEmpty, "\(dir) should be an empty directory: \(ls.summary) \(ls.out)")
            }

            let find = try await Tools.run("/usr/bin/find", [mount.path])
            #expect(find.ok, "\(find.summary)")
            let found = Set(find.lines.map { String($0.dropFirst(mount.path.count)) })
            #expect(found == ["", "/correctPrefix", "/correctPrefix/happyItem", "/lonelyItem", "/wrongPrefix"], "find: \(find.lines)")
        }

        // Checks semantics.md#shows-directory-wins
        @Test("an object beside a directory of the same name is hidden: the directory wins")
        func directoryWinsOverFile() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("dirwins")
            try await gcs.put("\(prefix)/a", Data("I am hidden\n".utf8))
            try await gcs.put("\(prefix)/a/b", Data("child\n".utf8))
            try await gcs.put("\(prefix)/z", Data("plain\n".utf8))

            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { mount.cleanup() }

            // A lookup before any listing, then after.
            let first = try await Tools.run("/usr/bin/stat", ["-c", "%F", mount.at("a")])
            #expect(first.ok && first.out.trimmingCharacters(in: .whitespacesAndNewlines) == "directory",
                    "stat a (before listing): \(first.summary) \(first.out)")

            let ls = try await Tools.run("/bin/ls", ["-la", "--time-style=+%s", mount.path])
            let entries = Self.parseLong(ls.lines).filter { $0.name != "." && $0.name != ".." }
            #expect(entries.map(\.name) == ["a", "z"], "ls -la: \(ls.out)")
            #expect(entries.first?.type == "d", "a should be a directory: \(entries)")

            let inside = try await Tools.run("/bin/ls", ["-A", mount.at("a")])
            #expect(inside.ok && inside.lines == ["b"], "\(inside.summary) \(inside.out)")
            let cat = try await Tools.run("/bin/cat", [mount.at("a")])
            #expect(!cat.ok && cat.stderr.contains("Is a directory"), "cat a: \(cat.summary)")
            let child = try await Tools.run("/bin/cat", [mount.at("a/b")])
            #expect(child.ok && child.out == "child\n", "\(child.summary)")
        }
    }
}
