import Foundation
import TestServerClient
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// A shared mount (`allow_other,default_permissions`): the kernel
    /// checks every access against the modes and owners bucketfs reports,
    /// so a directory's must be its placeholder's wherever the mount learns
    /// them from, a listing included (issue 17, item 1: after a remount or
    /// a TTL expiry, `ls w` made w/x 0755 root:root, open to everyone).
    @Suite struct Permissions {
        static let owner: UInt32 = 1001
        static let other: UInt32 = 1002

        /// Runs `script` with sh as `uid` (group `uid`, no supplementary
        /// groups), in `directory`.
        static func runAs(_ uid: UInt32, in directory: String, _ script: String) async throws -> ToolResult {
            try await Tools.run("/usr/bin/setpriv", [
                "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/bin/sh", "-c", "cd \"$0\" && \(script)", directory,
            ], timeout: .seconds(30))
        }

        /// `stat -c '%a %u:%g'` of `path`.
        static func modeAndOwner(_ path: String) -> String {
            var st = stat()
            guard lstat(path, &st) == 0 else { return "lstat failed: \(String(cString: strerror(errno)))" }
            return "\(String(st.st_mode & 0o7777, radix: 8)) \(st.st_uid):\(st.st_gid)"
        }

        /// What the tree shows and allows, with the directories' attributes
        /// learnt from a listing (`ls w` first, as the repro).
        static func checkTree(_ mount: Mount, _ gcs: DirectGCS, prefix: String, round: String) async throws {
            let w = mount.at("w")
            let listed = try await Tools.run("/bin/ls", [w])
            #expect(listed.ok && Set(listed.lines) == ["shared", "x"], "\(round): \(listed.summary) \(listed.out)")
            #expect(modeAndOwner(w + "/x") == "700 1001:1001", "\(round)")
            #expect(modeAndOwner(w + "/shared") == "1777 0:0", "\(round)")

            // Another user can neither list the private directory nor read in it.
            let list = try await runAs(other, in: w, "ls x")
            #expect(!list.ok && list.stderr.contains("Permission denied"), "\(round): \(list.summary)")
            let read = try await runAs(other, in: w, "cat x/secret")
            #expect(!read.ok && read.stderr.contains("Permission denied"), "\(round): \(read.summary)")
            // Its owner can create a file in it.
            let own = try await runAs(owner, in: w, "echo mine > x/own-\(round) && ls x")
            #expect(own.ok && own.lines.contains("own-\(round)"), "\(round): \(own.summary)")
            let stored = try await gcs.resource("\(prefix)/w/x/own-\(round)")
            #expect((stored?["metadata"] as? [String: String])?["goog-reserved-posix-uid"] == "1001", "\(round): \(String(describing: stored))")

            // Both can create in the shared directory; only the owner of a
            // file deletes it there (the sticky bit).
            let first = try await runAs(owner, in: w, "echo a > shared/by1001-\(round)")
            #expect(first.ok, "\(round): \(first.summary)")
            let second = try await runAs(other, in: w, "echo b > shared/by1002-\(round)")
            #expect(second.ok, "\(round): \(second.summary)")
            let steal = try await runAs(other, in: w, "rm -f shared/by1001-\(round)")
            #expect(!steal.ok && steal.stderr.contains("Operation not permitted"), "\(round): \(steal.summary)")
            #expect(try await gcs.resource("\(prefix)/w/shared/by1001-\(round)") != nil, "\(round): the file is still stored")
            #expect(try await gcs.resource("\(prefix)/w/shared/by1002-\(round)") != nil, "\(round)")
        }

        // Checks semantics.md#shows-owners-permissions
        @Test("a write by another user clears setuid, and setgid with group execute, through a write-only or a read-write descriptor; root's keeps them")
        func aWriteByAnotherUserClearsSetIDBits() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("setid")
            let mount = try await Mount.start(
                endpoint: gcs.base, prefix: prefix, options: ["-o", "allow_other,default_permissions"])
            defer { mount.cleanup() }
            #expect(chmod(mount.base, 0o755) == 0)
            // name: mode set by root, who appends, how (sh: `>>` opens for
            // writing only, `1<>` for reading and writing), mode after
            let cases: [(String, String, UInt32, String, String)] = [
                ("suid-wronly", "4777", Self.other, ">>", "777"),
                ("suid-rdwr", "4777", Self.other, "1<>", "777"),
                ("sgid-gx-wronly", "2777", Self.other, ">>", "777"),
                ("sgid-no-gx-wronly", "2767", Self.other, ">>", "2767"),
                ("suid-by-root", "4777", 0, ">>", "4777"),
            ]
            let made = try await Self.runAs(0, in: mount.path, cases.map { "echo a > \($0.0) && chmod \($0.1) \($0.0)" }.joined(separator: " && "))
            #expect(made.ok, "\(made.summary)")
            for (name, _, uid, redirect, after) in cases {
                let wrote = try await Self.runAs(uid, in: mount.path, "echo more \(redirect) \(name)")
                #expect(wrote.ok, "\(name): \(wrote.summary)")
                #expect(Self.modeAndOwner(mount.at(name)).hasPrefix("\(after) "), "\(name): \(Self.modeAndOwner(mount.at(name)))")
                let stored = try await gcs.resource("\(prefix)/\(name)")?["metadata"] as? [String: String]
                #expect(stored?["goog-reserved-posix-mode"] == after, "\(name) as stored: \(String(describing: stored))")
            }
        }

        // Checks semantics.md#shows-owners-permissions
        @Test("nested directories keep mode, owner and sticky bit after a remount and a TTL expiry, and the kernel enforces them")
        func nestedDirectoriesKeepTheirPermissions() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("perms")
            let options = ["-o", "allow_other,default_permissions", "--stat-ttl", "2"]
            let setup = try await Mount.start(endpoint: gcs.base, prefix: prefix, options: options)
            defer { setup.cleanup() }
            let w = setup.at("w")
            let made = try await Tools.run("/bin/sh", ["-c", """
                mkdir -p "$0/x" "$0/shared" && chmod 0700 "$0/x" && chown 1001:1001 "$0/x" && chmod 1777 "$0/shared" \
                && echo secret > "$0/x/secret"
                """, w])
            #expect(made.ok, "\(made.summary)")
            // The placeholders carry it all, as gcloud storage writes it.
            let x = try await gcs.resource("\(prefix)/w/x/")?["metadata"] as? [String: String]
            #expect(x?["goog-reserved-posix-mode"] == "700" && x?["goog-reserved-posix-uid"] == "1001" && x?["goog-reserved-posix-gid"] == "1001", "\(String(describing: x))")
            let shared = try await gcs.resource("\(prefix)/w/shared/")?["metadata"] as? [String: String]
            #expect(shared?["goog-reserved-posix-mode"] == "1777", "\(String(describing: shared))")
            setup.cleanup()

            let mount = try await Mount.start(endpoint: gcs.base, prefix: prefix, options: options)
            defer { mount.cleanup() }
            // Other users must reach the mountpoint (mkdtemp made its parent 0700).
            #expect(chmod(mount.base, 0o755) == 0)
            try await Self.checkTree(mount, gcs, prefix: prefix, round: "remount")
            // Past the stat TTL (and the kernel's attribute timeout, the same):
            // everything comes from new listings again.
            try await Task.sleep(for: .seconds(3))
            try await Self.checkTree(mount, gcs, prefix: prefix, round: "ttl")
        }
    }
}
