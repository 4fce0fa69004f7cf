import Foundation
import TestServerClient
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// What the speed work of issue 11 must not cost in semantics, and the
    /// requests it saves, counted in the emulator's request log.
    @Suite struct RequestPaths {
        // Checks semantics.md#write-shell-redirection
        @Test("bash `printf > f` uploads each new file once; touch and a single close still make the object before they return")
        func shellRedirectionUploadsOnce() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("redir")
            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { mount.cleanup() }
            let log = try RequestLog.mark()
            let loop = try await Tools.run("/bin/bash", ["-c", """
                for i in 0 1 2 3 4 5 6 7 8 9; do printf 'file %s\\n' "$i" > "$1/f$i"; done
                """, "bash", mount.path])
            #expect(loop.ok, "\(loop.summary)\nlog:\n\(mount.logTail())")
            for i in 0..<10 {
                try await ObjectChecks.expect(gcs, "\(prefix)/f\(i)", holds: Data("file \(i)\n".utf8), "right after the loop")
            }
            let sent = try log.entries().filter { $0.method == "POST" && $0.path.contains("/upload/") }
            #expect(sent.count == 10, "one upload per file, not one empty and one full: \(sent)")

            // touch: one descriptor (duplicated onto stdin and closed), a
            // timestamp change, the last close: the object exists when it returns.
            let touch = try await Tools.run("/usr/bin/touch", [mount.at("touched")])
            #expect(touch.ok, "\(touch.summary)")
            try await ObjectChecks.expect(gcs, "\(prefix)/touched", holds: Data(), "right after touch returned")

            // A program that closes its only descriptor of a new file gets
            // the object before close returns; one that closes a duplicate
            // gets it at the last close.
            let python = try await Tools.run("/usr/bin/python3", ["-c", """
                import os, sys, urllib.error, urllib.parse, urllib.request
                base, bucket, prefix, mp = sys.argv[1:5]
                def exists(name):
                    try:
                        urllib.request.urlopen(f"{base}/storage/v1/b/{bucket}/o/" + urllib.parse.quote(f"{prefix}/{name}", safe=""))
                        return True
                    except urllib.error.HTTPError:
                        return False
                fd = os.open(mp + "/single", os.O_CREAT | os.O_WRONLY, 0o644)
                os.close(fd)
                print("single", exists("single"))
                fd = os.open(mp + "/dup", os.O_CREAT | os.O_WRONLY, 0o644)
                other = os.dup(fd)
                os.close(fd)
                os.write(other, b"via the duplicate")
                os.close(other)
                print("dup", exists("dup"))
                """, try MountEnv.emulator(), MountEnv.bucket, prefix, mount.path])
            #expect(python.ok, "\(python.summary)")
            #expect(python.lines == ["single True", "dup True"], "\(python.out)")
            try await ObjectChecks.expect(gcs, "\(prefix)/dup", holds: Data("via the duplicate".utf8), "after the last close")
        }

        // Checks semantics.md#shows-tree-walks
        @Test("find over a tree of 16 directories lists it flat after the second subdirectory, and sees every file")
        func findListsFlat() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("walk")
            var objects: [(String, Data)] = []
            for a in 0..<3 { for b in 0..<4 { for c in 0..<5 { objects.append(("\(prefix)/t/d\(a)/e\(b)/f\(c)", Data("\(a)\(b)\(c)".utf8))) } } }
            try await gcs.putAll(objects)
            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { mount.cleanup() }
            let log = try RequestLog.mark()
            let find = try await Tools.run("/usr/bin/find", [mount.at("t"), "-type", "f"])
            #expect(find.ok, "\(find.summary)")
            #expect(Set(find.lines) == Set(objects.map { mount.at(String($0.0.dropFirst(prefix.count + 1))) }))
            let lists = try log.entries().filter { $0.method == "GET" && $0.path.hasSuffix("/o") }
            let flat = lists.filter { $0.parameter("delimiter") == nil }
            #expect(!flat.isEmpty, "a flat listing walked the tree: \(lists)")
            #expect(lists.count < 8, "16 directories, far fewer listings: \(lists)")
            let du = try await Tools.run("/usr/bin/du", ["-s", "--apparent-size", "--block-size=1", mount.at("t")])
            #expect(du.ok && du.lines.first?.split(separator: "\t").first.flatMap { Int($0) }.map { $0 >= 180 } == true, "\(du.out)")
        }

        // Checks semantics.md#shows-reads
        @Test("the kernel reads ahead 16 MiB (1 MiB requests); a sequential read of 40 MiB returns the object's bytes, twice")
        func bigReadsReturnTheRightBytes() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("bigread")
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            let data = MountEnv.pattern(40 << 20, seed: 11)
            try data.write(to: URL(fileURLWithPath: "\(scratch)/big.bin"))
            try await gcs.putFile("\(prefix)/big.bin", path: "\(scratch)/big.bin")
            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { mount.cleanup() }
            for pass in ["cold", "from the page cache"] {
                let cmp = try await Tools.run("/usr/bin/cmp", [mount.at("big.bin"), "\(scratch)/big.bin"])
                #expect(cmp.ok, "\(pass): \(cmp.summary)")
            }
            var st = stat()
            #expect(stat(mount.path, &st) == 0)
            let device = "\(UInt32(truncatingIfNeeded: st.st_dev >> 8) & 0xfff):\(UInt32(truncatingIfNeeded: st.st_dev & 0xff) | UInt32(truncatingIfNeeded: (st.st_dev >> 12) & 0xfff00))"
            if getuid() == 0 {
                let window = try? String(contentsOfFile: "/sys/class/bdi/\(device)/read_ahead_kb", encoding: .utf8)
                #expect(window?.trimmingCharacters(in: .whitespacesAndNewlines) == "16384", "bdi \(device): \(window ?? "none")")
            }
        }
    }
}
