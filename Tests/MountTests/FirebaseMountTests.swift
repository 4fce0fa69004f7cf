import Foundation
import TestServerClient
import Testing
import Transport
#if canImport(Glibc)
import Glibc
import TestSupport
#endif

extension MountTests {
    /// Mounts signed in to Firebase Auth as user A, through Firebase
    /// Storage's v0 API on the loopback server (`firebase_emulator.py`),
    /// whose rules give each user `users/UID/**` and everyone `public/**`
    /// to read. Results are checked through the server's JSON API (its
    /// admin view), never through the mount.
    @Suite struct Firebase {
        static let apiKey = "fake-api-key"

        struct User {
            let uid: String
            let email: String
            let passwordFile: String
        }

        /// A bucket of its own, users A and B, and a scratch directory.
        struct Setup {
            let endpoint: String
            let gcs: DirectGCS
            let bucket: String
            let scratch: String
            let a: User
            let b: User

            init() async throws {
                endpoint = try MountEnv.firebase()
                bucket = "fbmt-\(UUID().uuidString.prefix(8).lowercased())"
                gcs = DirectGCS(base: endpoint, bucket: bucket)
                scratch = try Scratch.directory()
                a = try await Self.newUser(endpoint, scratch: scratch, name: "a")
                b = try await Self.newUser(endpoint, scratch: scratch, name: "b")
            }

            /// An email/password account made through the Auth endpoint, its
            /// password in a file (as `--firebase-password-file` reads it).
            static func newUser(_ endpoint: String, scratch: String, name: String) async throws -> User {
                let email = "\(name)-\(UUID().uuidString.prefix(8).lowercased())@example.com"
                let password = "pw \(UUID().uuidString)"
                let json = try await post(endpoint, "/identitytoolkit.googleapis.com/v1/accounts:signUp?key=\(apiKey)",
                                          ["email": email, "password": password])
                let uid = try #require(json["localId"] as? String)
                let file = "\(scratch)/\(name).password"
                try Data((password + "\n").utf8).write(to: URL(fileURLWithPath: file))
                return User(uid: uid, email: email, passwordFile: file)
            }

            @discardableResult
            static func post(_ endpoint: String, _ path: String, _ json: [String: Any]) async throws -> [String: Any] {
                let response = try await DirectGCS.transport.send(HTTPRequest(
                    method: .post, url: endpoint + path, headers: ["Content-Type": "application/json"],
                    body: .bytes(try JSONSerialization.data(withJSONObject: json)), isIdempotent: false))
                guard response.isSuccess else { throw HarnessError("POST \(path) answered \(response.status)") }
                return (try JSONSerialization.jsonObject(with: response.body) as? [String: Any]) ?? [:]
            }

            /// Mounts the whole bucket signed in as `user`; with `fstabStyle`
            /// the sign-in goes in `-o name=value` options, as /etc/fstab
            /// passes them.
            func mount(as user: User, options: [String] = [], fstabStyle: Bool = false, through proxy: FaultProxy? = nil) async throws -> Mount {
                let endpoint = proxy?.endpoint ?? endpoint
                let host = String(endpoint.dropFirst("http://".count))
                let signIn = fstabStyle
                    ? ["-o", "firebase_api_key=\(Firebase.apiKey),firebase_email=\(user.email),firebase_password_file=\(user.passwordFile),firebase_auth_emulator=\(host)"]
                    : ["--firebase-api-key", Firebase.apiKey, "--firebase-email", user.email,
                       "--firebase-password-file", user.passwordFile, "--firebase-auth-emulator", host]
                return try await Mount.start(endpoint: endpoint, bucket: bucket, prefix: "", options: signIn + options)
            }

            /// The v0 requests the server saw (with who made them).
            func requests() async throws -> [[String: Any]] { try await requestLog.entries() }

            func clearRequests() async throws { try await requestLog.clear() }

            var requestLog: ServerRequestLog { ServerRequestLog(endpoint + "/_firebase/requests") }

            /// The most requests the server handled at once since the last clear.
            func widestConcurrency() async throws -> Int {
                let response = try await DirectGCS.transport.send(HTTPRequest(method: .get, url: endpoint + "/_firebase/concurrency", isIdempotent: true))
                return ((try JSONSerialization.jsonObject(with: response.body) as? [String: Any])?["widest"] as? Int) ?? 0
            }
        }

        static func run(_ tool: String, _ arguments: [String]) async throws -> ToolResult {
            try await Tools.run(tool, arguments, timeout: .seconds(60))
        }

        @Test("signed in as A: A's folder reads and writes like any mount, the ID token renewed meanwhile", .timeLimit(.minutes(3)))
        func ownFolderReadWrite() async throws {
            let s = try await Setup()
            defer { Scratch.remove(s.scratch) }
            let folder = "users/\(s.a.uid)"
            try await s.gcs.put("\(folder)/notes.txt", Data("A's notes\n".utf8))
            try await s.gcs.put("\(folder)/photos/space.jpg", MountEnv.pattern(300_000, seed: 1), contentType: "image/jpeg")
            // Tokens of 4 s: the mount must renew them as it goes.
            try await Setup.post(s.endpoint, "/_auth/config", ["tokenLifetime": 4, "localId": s.a.uid])
            // 1 MiB upload chunks: the 5 MiB cp below streams over v0's
            // resumable protocol (the server is on this host: without
            // single-request-max off it would go up in one request).
            let mount = try await s.mount(as: s.a, options: ["--upload-chunk-size", "1", "-o", "single-request-max=off"])
            defer { mount.cleanup() }
            let mine = mount.at(folder)

            let listing = try await Self.run("/bin/ls", ["-l", mine, mine + "/photos"])
            #expect(listing.ok, "\(listing.summary)\nlog:\n\(mount.logTail())")
            #expect(listing.out.contains(" 10 ") && listing.out.contains("notes.txt"), "\(listing.out)")
            #expect(listing.out.contains(" 300000 ") && listing.out.contains("space.jpg"), "\(listing.out)")
            #expect(FileManager.default.contents(atPath: mine + "/notes.txt") == Data("A's notes\n".utf8))
            #expect(FileManager.default.contents(atPath: mine + "/photos/space.jpg") == MountEnv.pattern(300_000, seed: 1))

            let local = s.scratch + "/upload.bin"
            let data = MountEnv.pattern(5 << 20, seed: 2)
            try data.write(to: URL(fileURLWithPath: local))
            let cp = try await Self.run("/bin/cp", [local, mine + "/upload.bin"])
            #expect(cp.ok, "\(cp.summary)\nlog:\n\(mount.logTail())")
            try await ObjectChecks.expect(s.gcs, "\(folder)/upload.bin", holds: data, "cp into A's folder")
            let commands = try await s.requests().filter { ($0["query"] as? String ?? "").contains("upload.bin") }.compactMap { $0["command"] as? String }
            #expect(commands.first == "start" && commands.last == "upload, finalize" && commands.count >= 5,
                    "streamed in 1 MiB chunks: \(commands)")

            let append = try await Self.run("/bin/sh", ["-c", "printf 'more\\n' >> '\(mine)/notes.txt'"])
            #expect(append.ok, "\(append.summary)")
            #expect(try await s.gcs.download("\(folder)/notes.txt") == Data("A's notes\nmore\n".utf8))

            try await Task.sleep(for: .seconds(4))  // past the first token's expiry
            let mkdir = try await Self.run("/bin/mkdir", [mine + "/new-dir"])
            #expect(mkdir.ok, "\(mkdir.summary)")
            #expect(try await s.gcs.resource("\(folder)/new-dir/") != nil, "mkdir made the placeholder")
            let mv = try await Self.run("/bin/mv", [mine + "/notes.txt", mine + "/new-dir/notes.txt"])
            #expect(mv.ok, "\(mv.summary)\nlog:\n\(mount.logTail())")
            #expect(try await s.gcs.resource("\(folder)/notes.txt") == nil)
            #expect(try await s.gcs.download("\(folder)/new-dir/notes.txt") == Data("A's notes\nmore\n".utf8))
            let rm = try await Self.run("/bin/rm", [mine + "/upload.bin"])
            #expect(rm.ok, "\(rm.summary)")
            #expect(try await s.gcs.resource("\(folder)/upload.bin") == nil)
            // Metadata as xattrs and symbolic links work as on any mount.
            let setfattr = try await Self.run("/usr/bin/setfattr", ["-n", "user.location", "-v", "Yosemite", mine + "/photos/space.jpg"])
            #expect(setfattr.ok, "\(setfattr.summary)\nlog:\n\(mount.logTail())")
            #expect(try await s.gcs.customMetadata("\(folder)/photos/space.jpg")["location"] == "Yosemite")
            let getfattr = try await Self.run("/usr/bin/getfattr", ["--only-values", "-n", "user.location", mine + "/photos/space.jpg"])
            #expect(getfattr.out == "Yosemite", "\(getfattr.summary)")
            let ln = try await Self.run("/bin/ln", ["-s", "photos/space.jpg", mine + "/link.jpg"])
            #expect(ln.ok, "\(ln.summary)")
            #expect(try await s.gcs.customMetadata("\(folder)/link.jpg")["gcsfuse_symlink_target"] == "photos/space.jpg")
            #expect(FileManager.default.contents(atPath: mine + "/link.jpg") == MountEnv.pattern(300_000, seed: 1))

            let seen = try await s.requests().filter { ($0["path"] as? String ?? "").hasPrefix("/v0/b/\(s.bucket)") }
            #expect(!seen.isEmpty)
            #expect(seen.allSatisfy { $0["auth"] as? String == "uid:\(s.a.uid)" && $0["scheme"] as? String == "Firebase" },
                    "every request as A, with a valid token: \(seen.filter { $0["auth"] as? String != "uid:\(s.a.uid)" })")
            let log = (try? String(contentsOfFile: mount.logFile, encoding: .utf8)) ?? ""
            #expect(log.contains("refreshed ID token"), "the 4 s token was renewed\nlog:\n\(mount.logTail())")
            let password = try String(contentsOfFile: s.a.passwordFile, encoding: .utf8).trimmingCharacters(in: .newlines)
            // The lines that carry one, cut before it, say where it leaked.
            let leaks = log.split(separator: "\n").filter { $0.contains(password) || $0.contains(Self.apiKey) || $0.contains("eyJ") }
                .map { String($0.prefix(160)).components(separatedBy: "eyJ")[0] }
            #expect(leaks.isEmpty, "no secret in the log: \(leaks)")
            // Who the mount signed in as.
            let status = try await runBucketfs(["status", mount.path])
            #expect(status.out.contains("credentials: Firebase user \(s.a.uid) (\(s.a.email))"), "\(status.summary)")
        }

        // Checks semantics.md#errno-eacces
        @Test("signed in as A: B's folder is EACCES on list, read and write, with nothing lost; public/ is readable", .timeLimit(.minutes(3)))
        func othersFolderAndPublic() async throws {
            let s = try await Setup()
            defer { Scratch.remove(s.scratch) }
            try await s.gcs.put("users/\(s.b.uid)/secret.txt", Data("B only".utf8))
            try await s.gcs.put("users/\(s.a.uid)/mine.txt", Data("A".utf8))
            try await s.gcs.put("public/notice.txt", Data("for everyone\n".utf8))
            let mount = try await s.mount(as: s.a, fstabStyle: true)
            defer { mount.cleanup() }
            let theirs = mount.at("users/\(s.b.uid)")

            let ls = try await Self.run("/bin/ls", [theirs])
            #expect(!ls.ok && ls.stderr.contains("Permission denied"), "\(ls.summary)")
            let cat = try await Self.run("/bin/cat", [theirs + "/secret.txt"])
            #expect(!cat.ok && cat.stderr.contains("Permission denied"), "\(cat.summary)")
            let local = s.scratch + "/mine.txt"
            try Data("A's attempt".utf8).write(to: URL(fileURLWithPath: local))
            let cp = try await Self.run("/bin/cp", [local, theirs + "/planted.txt"])
            #expect(!cp.ok && cp.stderr.contains("Permission denied"), "\(cp.summary)")
            let rm = try await Self.run("/bin/rm", ["-f", theirs + "/secret.txt"])
            #expect(!rm.ok && rm.stderr.contains("Permission denied"), "\(rm.summary)")
            let mv = try await Self.run("/bin/mv", [mount.at("users/\(s.a.uid)/mine.txt"), theirs + "/mine.txt"])
            #expect(!mv.ok && mv.stderr.contains("Permission denied"), "\(mv.summary)")
            // The top of the bucket cannot be listed either (rules), but users/ can be entered.
            let top = try await Self.run("/bin/ls", [mount.path])
            #expect(!top.ok && top.stderr.contains("Permission denied"), "\(top.summary)")

            // Nothing lost, nothing planted.
            #expect(try await s.gcs.download("users/\(s.b.uid)/secret.txt") == Data("B only".utf8))
            #expect(try await s.gcs.list(prefix: "users/\(s.b.uid)/") == ["users/\(s.b.uid)/secret.txt"])
            #expect(try await s.gcs.download("users/\(s.a.uid)/mine.txt") == Data("A".utf8))
            #expect(FileManager.default.contents(atPath: local) == Data("A's attempt".utf8))

            let pub = try await Self.run("/bin/ls", ["-l", mount.at("public")])
            #expect(pub.ok && pub.out.contains("notice.txt") && pub.out.contains(" 13 "), "\(pub.summary + pub.out)")
            #expect(FileManager.default.contents(atPath: mount.at("public/notice.txt")) == Data("for everyone\n".utf8))
            let denied = try await s.requests().filter { ($0["path"] as? String ?? "").contains(s.b.uid) || ($0["query"] as? String ?? "").contains(s.b.uid) }
            #expect(!denied.isEmpty && denied.allSatisfy { $0["method"] as? String == "GET" }, "only reads were tried in B's folder: \(denied)")
        }

        @Test("a refused sign-in is exit code 3 with the service's reason and no secret")
        func refusedSignIn() async throws {
            let s = try await Setup()
            defer { Scratch.remove(s.scratch) }
            let wrong = s.scratch + "/wrong.password"
            try Data("not the password\n".utf8).write(to: URL(fileURLWithPath: wrong))
            let mountpoint = s.scratch + "/mnt"
            try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
            let host = String(s.endpoint.dropFirst("http://".count))
            let result = try await runBucketfs([
                "mount", "--endpoint", s.endpoint, "gs://\(s.bucket)", mountpoint, "--cache-dir", s.scratch + "/cache",
                "--firebase-api-key", Self.apiKey, "--firebase-email", s.a.email, "--firebase-password-file", wrong,
                "--firebase-auth-emulator", host,
            ])
            #expect(result.status == 3, "\(result.summary)")
            #expect(result.stderr.contains("INVALID_PASSWORD"), "\(result.stderr)")
            #expect(!result.stderr.contains("not the password") && !result.stderr.contains(Self.apiKey), "\(result.stderr)")
            #expect(!Kernel.isMounted(mountpoint))
        }

        /// v0 listings return no placeholders: each listed directory's is
        /// read, so its mode and owner are the placeholder's (issue 17,
        /// item 1), not the mount's defaults.
        @Test("ls -l of a folder shows each subdirectory's stored mode and owner")
        func listedDirectoriesKeepTheirModes() async throws {
            let s = try await Setup()
            defer { Scratch.remove(s.scratch) }
            let folder = "users/\(s.a.uid)"
            try await s.gcs.put("\(folder)/private/", Data(), metadata: [
                "goog-reserved-posix-mode": "700", "goog-reserved-posix-uid": "1001", "goog-reserved-posix-gid": "1001",
            ])
            try await s.gcs.put("\(folder)/private/secret", Data("s\n".utf8))
            try await s.gcs.put("\(folder)/shared/", Data(), metadata: ["goog-reserved-posix-mode": "1777"])
            try await s.gcs.put("\(folder)/implicit/f", Data("f\n".utf8))
            let mount = try await s.mount(as: s.a)
            defer { mount.cleanup() }
            let listing = try await Self.run("/bin/ls", ["-ln", mount.at(folder)])
            #expect(listing.ok, "\(listing.summary)")
            let modes = Dictionary(listing.lines.dropFirst().map { line in
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                return (String(fields.last!), "\(fields[0]) \(fields[2]):\(fields[3])")
            }, uniquingKeysWith: { a, _ in a })
            #expect(modes["private"] == "drwx------ 1001:1001", "\(listing.out)")
            #expect(modes["shared"]?.hasPrefix("drwxrwxrwt ") == true, "\(listing.out)")
            #expect(modes["implicit"]?.hasPrefix("drwxr-xr-x ") == true, "no placeholder: the defaults; \(listing.out)")
        }

        /// The README's first steps for a user with no objects yet: the
        /// folder is ENOENT until `mkdir -p` stores its placeholder.
        @Test("a new user's folder: ENOENT at first, then mkdir -p, ls -l and cp as the README shows")
        func newUsersFolder() async throws {
            let s = try await Setup()
            defer { Scratch.remove(s.scratch) }
            let mount = try await s.mount(as: s.a)
            defer { mount.cleanup() }
            let mine = mount.at("users/\(s.a.uid)")
            let before = try await Self.run("/bin/ls", ["-l", mine + "/"])
            #expect(!before.ok && before.stderr.contains("No such file or directory"), "\(before.summary)")
            let mkdir = try await Self.run("/bin/mkdir", ["-p", mine])
            #expect(mkdir.ok, "\(mkdir.summary)\nlog:\n\(mount.logTail())")
            #expect(try await s.gcs.resource("users/\(s.a.uid)/") != nil, "mkdir -p stored the placeholder")
            let empty = try await Self.run("/bin/ls", ["-l", mine + "/"])
            #expect(empty.ok && empty.lines == ["total 0"], "\(empty.summary) \(empty.out)")
            let report = s.scratch + "/report.pdf"
            try Data("%PDF-1.7\n".utf8).write(to: URL(fileURLWithPath: report))
            let cp = try await Self.run("/bin/cp", [report, mine + "/"])
            #expect(cp.ok, "\(cp.summary)\nlog:\n\(mount.logTail())")
            #expect(try await s.gcs.download("users/\(s.a.uid)/report.pdf") == Data("%PDF-1.7\n".utf8))
        }

        /// As an unreachable storage endpoint (Lifecycle.deadEndpoint): exit
        /// 4 within the preflight's 15 s, or sooner when the retry budget
        /// is shorter, not exit 3 after the sign-in's whole retry budget
        /// (46 s by default).
        @Test("an unreachable Firebase Auth endpoint is exit code 4 within the preflight's bound", arguments: [
            ([String](), Duration.seconds(20)), (["--retry-attempts", "2", "--retry-max-time", "3"], .seconds(10)),
        ])
        func unreachableAuth(retry: [String], bound: Duration) async throws {
            let s = try await Setup()
            defer { Scratch.remove(s.scratch) }
            let mountpoint = s.scratch + "/mnt"
            try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
            let closed = try freePort()
            let result = try await runBucketfs([
                "mount", "--endpoint", s.endpoint, "gs://\(s.bucket)", mountpoint, "--cache-dir", s.scratch + "/cache",
                "--firebase-api-key", Self.apiKey, "--firebase-email", s.a.email, "--firebase-password-file", s.a.passwordFile,
                "--firebase-auth-emulator", "127.0.0.1:\(closed)",
            ] + retry)
            #expect(result.status == 4 && !result.signaled, "\(result.summary)")
            #expect(result.stderr.contains("Firebase Auth endpoint unreachable: http://127.0.0.1:\(closed)"), "\(result.stderr)")
            #expect(result.elapsed < bound, "took \(result.elapsed)")
            #expect(!Kernel.isMounted(mountpoint))
        }

        @Test("a write the server refuses at close: EACCES, the bytes in the recovery folder", .timeLimit(.minutes(3)))
        func refusedAtClose() async throws {
            let s = try await Setup()
            defer { Scratch.remove(s.scratch) }
            let folder = "users/\(s.a.uid)"
            try await s.gcs.put("\(folder)/keep.txt", Data("k".utf8))
            let mount = try await s.mount(as: s.a)
            defer { mount.cleanup() }
            // A rule on the upload (as a size or type rule would): 403 for this name.
            try await s.gcs.fault([
                "status": 403, "method": "POST", "path_contains": "refused.bin", "count": 5,
            ])
            let data = MountEnv.pattern(200_000, seed: 3)
            let fd = try Posix.open(mount.at("\(folder)/refused.bin"), O_WRONLY | O_CREAT | O_TRUNC)
            #expect(Posix.writeAll(fd, data) == nil)
            let closed = try #require(await Posix.within(.seconds(30)) { Glibc.close(fd) }, "close hung")
            #expect(closed.0.rc == -1 && closed.0.code == EACCES, "close: \(closed.0)\nlog:\n\(mount.logTail())")
            let recovery = "\(mount.cacheDir)/recovery/\(s.bucket)/\(folder)/refused.bin"
            #expect(FileManager.default.contents(atPath: recovery) == data, "the refused bytes wait in \(recovery)")
            #expect(try await s.gcs.resource("\(folder)/refused.bin") == nil)
            // A refusal is not retried in the background: the entry says so
            // (what `bucketfs status` shows), rather than nothing.
            let sidecar = (try? String(contentsOfFile: recovery + ".bucketfs-pending.json", encoding: .utf8)) ?? ""
            #expect(sidecar.contains("retryStopped") && sidecar.contains("not a transient failure"), "\(sidecar)")
        }

        @Test("over v0 (crc32c a decimal there): rename succeeds and gcs.crc32c is the base64 the JSON API shows", .timeLimit(.minutes(3)))
        func decimalCRC32CFromV0() async throws {
            let s = try await Setup()
            defer { Scratch.remove(s.scratch) }
            let folder = "users/\(s.a.uid)"
            let data = MountEnv.pattern(100_000, seed: 5)
            try await s.gcs.put("\(folder)/before.bin", data)
            let mount = try await s.mount(as: s.a)
            defer { mount.cleanup() }
            let resource = try #require(try await s.gcs.resource("\(folder)/before.bin"))
            let base64 = try #require(resource["crc32c"] as? String)
            let getfattr = try await Self.run("/usr/bin/getfattr", ["--only-values", "-n", "gcs.crc32c", mount.at("\(folder)/before.bin")])
            #expect(getfattr.ok && getfattr.out == base64, "\(getfattr.summary)\nlog:\n\(mount.logTail())")
            // rename copies through the client and checks the copy's CRC32C
            // against the source's: both must be read in the same encoding.
            let renamed = Posix.rename2(mount.at("\(folder)/before.bin"), mount.at("\(folder)/after.bin"), flags: 0)
            #expect(renamed.rc == 0, "rename: \(renamed)\nlog:\n\(mount.logTail())")
            try await ObjectChecks.expect(s.gcs, "\(folder)/after.bin", holds: data, "renamed over v0")
            #expect(try await s.gcs.resource("\(folder)/before.bin") == nil)
        }

        @Test("over v0, the finalizing chunk's answer lost or truncated: close succeeds, the object byte-identical, no recovery entry",
              .timeLimit(.minutes(3)), arguments: ["lost", "cut"])
        func finalAnswerLostOrTruncated(_ kind: String) async throws {
            let s = try await Setup()
            defer { Scratch.remove(s.scratch) }
            let proxy = try await FaultProxy(upstream: s.endpoint, bucket: s.bucket)
            defer { proxy.stop() }
            let folder = "users/\(s.a.uid)"
            // 9 MiB: over the multipart threshold, under the 64 MiB chunk:
            // one resumable chunk, `upload, finalize` (the server is on this
            // host: without single-request-max off, one request instead).
            let data = MountEnv.pattern(9 << 20, seed: 6)
            try data.write(to: URL(fileURLWithPath: s.scratch + "/file.bin"))
            try await s.gcs.put("\(folder)/keep.txt", Data("k".utf8))  // A's folder exists
            let mount = try await s.mount(as: s.a, options: ["-o", "single-request-max=off"], through: proxy)
            defer { mount.cleanup() }
            let fault: [String: Any] = kind == "lost" ? ["drop": true, "apply": true] : ["cut_answer_after_bytes": 40]
            try await proxy.fault([["method": "POST", "path_contains": "upload_id=", "min_body_bytes": 1].merging(fault) { $1 }])
            let cp = try await Self.run("/bin/cp", [s.scratch + "/file.bin", mount.at("\(folder)/file.bin")])
            #expect(cp.ok, "\(cp.summary)\nlog:\n\(mount.logTail())")
            try await ObjectChecks.expect(s.gcs, "\(folder)/file.bin", holds: data, "after a \(kind) final answer")
            #expect(try await proxy.requests().filter { $0.fault != nil }.count == 1, "the fault hit the finalizing chunk")
            let recovery = "\(mount.cacheDir)/recovery/\(s.bucket)/\(folder)/file.bin"
            #expect(!FileManager.default.fileExists(atPath: recovery), "no recovery entry")
        }

        @Test("ls -l of 1,000 objects: one listing, stats side by side; rename is bounded", .timeLimit(.minutes(3)))
        func largeListingAndRename() async throws {
            let s = try await Setup()
            defer { Scratch.remove(s.scratch) }
            let folder = "users/\(s.a.uid)"
            try await s.gcs.putAll((0..<1000).map { ("\(folder)/many/f\(String(format: "%04d", $0))", Data(count: $0 % 97)) }, width: 16)
            try await s.gcs.put("\(folder)/big.bin", MountEnv.pattern(3 << 20, seed: 4))
            try await s.gcs.put("\(folder)/small.txt", Data("s".utf8))
            let mount = try await s.mount(as: s.a, options: ["--rename-copy-limit", "1"])
            defer { mount.cleanup() }
            try await s.clearRequests()
            _ = try await Self.run("/usr/bin/stat", [mount.at("\(folder)/many")])
            let ls = try await Self.run("/bin/ls", ["-l", mount.at("\(folder)/many")])
            #expect(ls.ok, "\(ls.summary)")
            let rows = ls.lines.filter { $0.hasPrefix("-") }
            #expect(rows.count == 1000)
            #expect(rows.allSatisfy { row in
                let fields = row.split(separator: " ", omittingEmptySubsequences: true)
                guard let size = Int(fields[4]), let index = Int(fields.last!.dropFirst()) else { return false }
                return size == index % 97
            }, "every size right")
            let seen = try await s.requests()
            // stat's lookup of the directory reads its first page (all 1,000
            // names); ls -l goes on from it: one listing request in all.
            let pages = seen.filter { ($0["query"] as? String ?? "").contains("prefix=") && ($0["query"] as? String ?? "").contains("many") }
            #expect(pages.count == 1, "one listing page: \(pages)")
            #expect(seen.filter { ($0["path"] as? String ?? "").contains("many%2Ff") }.count == 1000, "one stat per object")
            let widest = try await s.widestConcurrency()
            #expect(widest >= 4, "the stats overlapped (\(widest) at once)")

            // rename: small files through the client; over the limit, EXDEV (mv copies itself).
            let mvSmall = try await Self.run("/bin/mv", [mount.at("\(folder)/small.txt"), mount.at("\(folder)/small2.txt")])
            #expect(mvSmall.ok, "\(mvSmall.summary)")
            #expect(try await s.gcs.download("\(folder)/small2.txt") == Data("s".utf8))
            let exdev = Posix.rename2(mount.at("\(folder)/big.bin"), mount.at("\(folder)/big2.bin"), flags: 0)
            #expect(exdev.rc == -1 && exdev.code == EXDEV, "rename(2) of 3 MiB over a 1 MiB limit: \(exdev)")
            let mvBig = try await Self.run("/bin/mv", [mount.at("\(folder)/big.bin"), mount.at("\(folder)/big2.bin")])
            #expect(mvBig.ok, "\(mvBig.summary)")
            try await ObjectChecks.expect(s.gcs, "\(folder)/big2.bin", holds: MountEnv.pattern(3 << 20, seed: 4), "mv after EXDEV")
            #expect(try await s.gcs.resource("\(folder)/big.bin") == nil)
            let dirExdev = Posix.rename2(mount.at("\(folder)/many"), mount.at("\(folder)/many2"), flags: 0)
            #expect(dirExdev.rc == -1 && dirExdev.code == EXDEV, "rename(2) of a directory: \(dirExdev)")
        }

        // The Firebase Storage emulator decodes object names twice
        // (firebase-tools, src/emulator/storage/apis/firebase.ts), so over
        // plain http names with % are refused before any request
        // (docs/firebase.md): EINVAL at once, not the ~50 s of retried 500s
        // `100%.txt` costs there, and never the bytes of `aA.txt` for
        // `a%41.txt`.
        @Test("names containing % on the emulator: EINVAL at once, nothing sent for them, the object they would alias untouched", .timeLimit(.minutes(3)))
        func percentNamesAreRefused() async throws {
            let s = try await Setup()
            defer { Scratch.remove(s.scratch) }
            let folder = "users/\(s.a.uid)"
            let aliased = Data("the object a%41.txt would alias\n".utf8)
            try await s.gcs.put("\(folder)/aA.txt", aliased)
            let mount = try await s.mount(as: s.a)
            defer { mount.cleanup() }

            let created = try #require(await Posix.within(.seconds(30)) {
                Glibc.open(mount.at("\(folder)/100%.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            }, "create hung")
            if created.0.rc >= 0 { Glibc.close(created.0.rc) }
            #expect(created.0 == Posix.Outcome(rc: -1, code: EINVAL), "create 100%.txt: \(created.0)\nlog:\n\(mount.logTail())")
            #expect(created.1 < .seconds(10), "refused at once, not after retries: \(created.1)")

            let written = try #require(await Posix.within(.seconds(30)) {
                Glibc.open(mount.at("\(folder)/a%41.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            }, "create hung")
            if written.0.rc >= 0 { Glibc.close(written.0.rc) }
            #expect(written.0 == Posix.Outcome(rc: -1, code: EINVAL), "create a%41.txt: \(written.0)")
            let read = try await Self.run("/bin/cat", [mount.at("\(folder)/a%41.txt")])
            #expect(!read.ok && !read.out.contains("alias"), "a%41.txt must not read as aA.txt: \(read.summary)")

            let listing = try await Self.run("/bin/ls", [mount.at(folder)])
            #expect(listing.ok && listing.out.split(separator: "\n") == ["aA.txt"], "\(listing.summary)")
            #expect(try await s.gcs.download("\(folder)/aA.txt") == aliased, "aA.txt untouched")
            let sent = try await s.requests().filter {
                let target = ($0["path"] as? String ?? "") + "?" + ($0["query"] as? String ?? "")
                return target.contains(s.bucket) && target.contains("%25")
            }
            #expect(sent.isEmpty, "requests naming an object with %: \(sent)")
        }
    }
}
