import Foundation
import TestServerClient
import TestSupport
import Testing
import Transport

extension MountTests {
    /// Credential files of each kind in a real mount, against
    /// Tests/Servers/token_server.py (token endpoint, IAM credentials) and
    /// fake_gcs.py, whose request log shows the bearer token and the quota
    /// project of each request.
    @Suite struct CredentialFiles {
        /// token_server.py as a child of the test, stopped by pid.
        final class TokenServer {
            let process: Tools.Running
            let base: String

            /// `arguments`: token_server.py's options beyond the port.
            init(_ arguments: [String] = []) async throws {
                let python = try MountEnv.variable("BUCKETFS_TEST_PYTHON")
                let script = try MountEnv.repo() + "/Tests/Servers/token_server.py"
                process = try Tools.Running(python, [script, "--port", "0"] + arguments)
                let deadline = ContinuousClock.now + .seconds(20)
                while true {
                    let out = (try? String(contentsOfFile: process.stdoutPath, encoding: .utf8)) ?? ""
                    if let line = out.split(separator: "\n").first(where: { $0.hasPrefix("READY ") }) {
                        base = "http://127.0.0.1:\(line.dropFirst("READY ".count))"
                        return
                    }
                    guard process.isRunning, ContinuousClock.now < deadline else {
                        let result = process.result()
                        process.kill()
                        throw HarnessError("token_server.py did not start: \(result.summary)")
                    }
                    try await Task.sleep(for: .milliseconds(50))
                }
            }

            func stop() {
                process.kill()
                _ = process.result()
            }
        }

        typealias Files = GoogleCredentialFiles
        static let target = Files.target

        /// gcloud's `authorized_user` file, with the server as its token_uri.
        static func userFile(_ server: TokenServer, _ dirs: Mount, quota: String) throws -> String {
            try Files.write(
                Files.authorizedUser(base: server.base, quota: quota), to: dirs.base + "/application_default_credentials.json")
        }

        /// Mounts with `options`, writes and lists, and returns what the
        /// bucket's server saw and `bucketfs status` said. `serverArguments`
        /// go to token_server.py, with `{dir}` replaced by a directory of
        /// the test's own. The bucket's server refuses requests without
        /// credentials (401), as Cloud Storage does for a private bucket.
        /// With `findsCredentials` the mount gets no credentials option and
        /// finds them as a user's mount would, with `applicationDefaults`
        /// as the environment of the Application Default Credentials.
        typealias Seen = (requests: [LoggedRequest], status: String, log: String)

        static func mountAndUse(
            serverArguments: [String] = [], findsCredentials: Bool = false,
            _ options: (TokenServer, Mount) throws -> [String]
        ) async throws -> Seen {
            let dirs = try Mount()
            defer { dirs.cleanup() }
            let server = try await TokenServer(serverArguments.map { $0.replacingOccurrences(of: "{dir}", with: dirs.base) })
            defer { server.stop() }
            let bucket = "creds-\(UUID().uuidString.prefix(8).lowercased())"
            let gcs = try DirectGCS.fake(bucket: bucket)
            try await Self.refuseAnonymous(gcs)
            let mount = try await Mount.start(
                endpoint: try MountEnv.fake(), bucket: bucket, prefix: "", options: try options(server, dirs),
                environment: findsCredentials ? Self.applicationDefaults(dirs) : [:], findsCredentials: findsCredentials)
            defer { mount.cleanup() }
            try Data("hello\n".utf8).write(to: URL(fileURLWithPath: mount.at("new.txt")))
            _ = try FileManager.default.contentsOfDirectory(atPath: mount.path)
            let status = try await runBucketfs(["status", mount.path])
            #expect(status.ok, "\(status.summary)")
            let requests = try await gcs.requests().filter { $0.path.contains("/b/\(bucket)") }
            let log = (try? String(contentsOfFile: mount.logFile, encoding: .utf8)) ?? ""
            return (requests, status.out, log)
        }

        /// fake_gcs.py answers every request on `gcs`'s bucket that has no
        /// Authorization header with 401.
        static func refuseAnonymous(_ gcs: DirectGCS) async throws {
            try await gcs.fault(["status": 401, "anonymous": true, "path_contains": "/b/\(gcs.bucket)", "count": 1_000_000])
        }

        /// The Application Default Credentials as gcloud leaves them:
        /// `application_default_credentials.json` in `dirs.base` (as
        /// `CLOUDSDK_CONFIG`, like ~/.config/gcloud) and nothing else of
        /// their order; no emulator named.
        static func applicationDefaults(_ dirs: Mount) -> [String: String] {
            [
                "CLOUDSDK_CONFIG": dirs.base, "GOOGLE_APPLICATION_CREDENTIALS": "", "GCE_METADATA_HOST": "",
                "NO_GCE_CHECK": "true", "STORAGE_EMULATOR_HOST": "",
            ]
        }

        /// `mountAndUse` with `--key-file`, the credential file `object` gives.
        static func mountWithFile(
            serverArguments: [String] = [], _ object: @escaping (TokenServer, Mount) throws -> [String: Any]
        ) async throws -> Seen {
            try await mountAndUse(serverArguments: serverArguments) { server, dirs in
                ["--key-file", try Files.write(try object(server, dirs), to: dirs.base + "/credentials.json")]
            }
        }

        /// Every request `seen` carried a bearer token starting with `bearer`
        /// and `quota` as its quota project, and `bucketfs status` named `identity`.
        static func expectAuthorised(
            _ seen: Seen, bearer: String, quota: String, identity: String,
            sourceLocation: SourceLocation = #_sourceLocation
        ) {
            #expect(seen.requests.count >= 3, "\(seen.requests)", sourceLocation: sourceLocation)
            for request in seen.requests {
                #expect(request.authorization?.hasPrefix(bearer) == true, "\(request)", sourceLocation: sourceLocation)
                #expect(request.userProject == quota, "\(request)", sourceLocation: sourceLocation)
            }
            #expect(seen.status.contains("credentials: \(identity)"), "\(seen.status)", sourceLocation: sourceLocation)
        }

        @Test("a gcloud authorized_user file: every request carries the user's token and the quota project; status names the user")
        func authorizedUser() async throws {
            let seen = try await Self.mountAndUse { server, dirs in
                ["--key-file", try Self.userFile(server, dirs, quota: "quota-user")]
            }
            let identity = "authorized user (client \(Files.clientID))"
            Self.expectAuthorised(seen, bearer: "Bearer user-", quota: "quota-user", identity: identity)
            let first = seen.log.split(separator: "\n").first.map(String.init) ?? ""
            #expect(first.contains("credentials") && first.contains(identity), "first log line: \(first)")
            #expect(!seen.log.contains("test-client-secret") && !seen.log.contains("1//test-refresh-token"))
        }

        @Test("--impersonate-service-account: requests carry the IAM-minted token of the service account; billing project as userProject")
        func impersonation() async throws {
            let seen = try await Self.mountAndUse { server, dirs in
                [
                    "--key-file", try Self.userFile(server, dirs, quota: "quota-user"),
                    "--impersonate-service-account", Self.target, "--iam-endpoint", server.base,
                    "--billing-project", "payer",
                ]
            }
            Self.expectAuthorised(
                seen, bearer: "Bearer iam-2-\(Self.target)", quota: "quota-user",
                identity: "impersonated service account \(Self.target)")
            for request in seen.requests {
                #expect(request.parameter("userProject") == "payer", "\(request)")
            }
        }
    }
}

extension MountTests.CredentialFiles {
    @Test("--endpoint keeps gcloud's Application Default Credentials: a server refusing anonymous requests sees the user's token and quota project")
    func endpointKeepsApplicationDefaultCredentials() async throws {
        let seen = try await Self.mountAndUse(findsCredentials: true) { server, dirs in
            _ = try Self.userFile(server, dirs, quota: "quota-adc")
            return []
        }
        Self.expectAuthorised(
            seen, bearer: "Bearer user-", quota: "quota-adc", identity: "authorized user (client \(Files.clientID))")
    }

    @Test("--anonymous sends no credentials even with gcloud's file at hand: the same server refuses the mount, exit 3")
    func anonymousSendsNoCredentials() async throws {
        let dirs = try Mount()
        defer { dirs.cleanup() }
        let server = try await TokenServer()
        defer { server.stop() }
        _ = try Self.userFile(server, dirs, quota: "quota-adc")
        let gcs = try DirectGCS.fake(bucket: "creds-anon-\(UUID().uuidString.prefix(8).lowercased())")
        try await Self.refuseAnonymous(gcs)
        let result = try await runBucketfs(
            ["mount", "--endpoint", try MountEnv.fake(), "--anonymous", "gs://\(gcs.bucket)", dirs.path, "--cache-dir", dirs.cacheDir],
            environment: Self.applicationDefaults(dirs))
        #expect(result.status == 3, "\(result.summary)")
        #expect(result.stderr.contains("credentials missing or refused"), "\(result.summary)")
        #expect(!Kernel.isMounted(dirs.path))
        let requests = try await gcs.requests().filter { $0.path.contains("/b/\(gcs.bucket)") }
        #expect(!requests.isEmpty && requests.allSatisfy { $0.authorization == nil }, "\(requests)")
    }

    @Test("no credentials found for a local http --endpoint: exit 3 suggesting --anonymous, before any request")
    func noCredentialsForALocalEndpointSuggestsAnonymous() async throws {
        let dirs = try Mount()
        defer { dirs.cleanup() }
        let gcs = try DirectGCS.fake(bucket: "creds-none-\(UUID().uuidString.prefix(8).lowercased())")
        let result = try await runBucketfs(
            ["mount", "--endpoint", try MountEnv.fake(), "gs://\(gcs.bucket)", dirs.path, "--cache-dir", dirs.cacheDir],
            environment: Self.applicationDefaults(dirs))
        #expect(result.status == 3, "\(result.summary)")
        #expect(result.stderr.contains("no Google credentials found"), "\(result.summary)")
        #expect(result.stderr.contains("\(try MountEnv.fake()) is a local endpoint: for an emulator, add --anonymous"), "\(result.summary)")
        #expect(!Kernel.isMounted(dirs.path))
        let requests = try await gcs.requests().filter { $0.path.contains("/b/\(gcs.bucket)") }
        #expect(requests.isEmpty, "\(requests)")
    }

    @Test("no credentials anywhere in the ADC order: exit 3 naming what was tried, before any request")
    func noCredentials() async throws {
        let dirs = try Mount()
        defer { dirs.cleanup() }
        // No emulator: the CLI would otherwise stay anonymous. NO_GCE_CHECK
        // keeps the metadata server out, so nothing leaves the machine.
        let result = try await runBucketfs(
            ["mount", "gs://adc-nothing", dirs.path, "--foreground"],
            environment: [
                "GOOGLE_APPLICATION_CREDENTIALS": "", "CLOUDSDK_CONFIG": "", "HOME": dirs.base,
                "GCE_METADATA_HOST": "", "NO_GCE_CHECK": "true", "STORAGE_EMULATOR_HOST": "",
            ])
        #expect(result.status == 3, "\(result.summary)")
        #expect(result.stderr.contains("no Google credentials found"), "\(result.summary)")
        #expect(result.stderr.contains("\(dirs.base)/.config/gcloud/application_default_credentials.json: no such file"), "\(result.summary)")
        #expect(result.stderr.contains("NO_GCE_CHECK"), "\(result.summary)")
        #expect(!Kernel.isMounted(dirs.path))
    }
}

extension MountTests.CredentialFiles {
    static let audience = Files.audience

    @Test("an external_account file (file-sourced subject token): requests carry the STS token and the quota project")
    func externalAccount() async throws {
        let seen = try await Self.mountWithFile { server, dirs in
            Files.externalAccount(base: server.base, source: try Files.fileSource(in: dirs.base), quota: "quota-ext")
        }
        Self.expectAuthorised(seen, bearer: "Bearer sts-", quota: "quota-ext", identity: "external account \(Self.audience)")
        #expect(!seen.log.contains("test-subject-token"))
    }

    @Test("an impersonated_service_account file: requests carry the IAM-minted token of its service account")
    func impersonatedServiceAccountFile() async throws {
        let seen = try await Self.mountWithFile { server, _ in
            Files.impersonatedServiceAccount(base: server.base, quota: "quota-imp")
        }
        Self.expectAuthorised(
            seen, bearer: "Bearer iam-2-\(Self.target)", quota: "quota-imp",
            identity: "impersonated service account \(Self.target)")
    }
}

extension MountTests.CredentialFiles {
    static let serviceAccountEmail = "mounter@bucketfs-test.iam.gserviceaccount.com"

    @Test("a service_account key file: requests carry the token of the signed JWT grant and the quota project; status names the account")
    func serviceAccount() async throws {
        // token_server.py makes the key and checks the JWT's signature
        // against it, with its header and claims.
        let email = Self.serviceAccountEmail
        let seen = try await Self.mountWithFile(serverArguments: [
            "--generate-key", "{dir}/private.pem", "--kid", "mount-key-1", "--issuer", email,
        ]) { server, dirs in
            Files.serviceAccount(
                base: server.base, email: email, keyID: "mount-key-1", quota: "quota-sa",
                privateKeyPEM: try String(contentsOfFile: dirs.base + "/private.pem", encoding: .utf8))
        }
        Self.expectAuthorised(seen, bearer: "Bearer tok-", quota: "quota-sa", identity: "service account \(email)")
        #expect(!seen.log.contains("PRIVATE KEY"))
    }

    @Test("an external_account file with a URL-sourced subject token and service-account impersonation: requests carry the IAM-minted token and the quota project")
    func externalAccountFromURLImpersonating() async throws {
        let seen = try await Self.mountWithFile { server, _ in
            Files.externalAccount(
                base: server.base, source: Files.urlSource(base: server.base), impersonate: true, quota: "quota-ext-url")
        }
        // sts-1 from the exchange, then iam-2 minted with it.
        Self.expectAuthorised(
            seen, bearer: "Bearer iam-2-\(Self.target)", quota: "quota-ext-url",
            identity: "external account \(Self.audience) as service account \(Self.target)")
        #expect(!seen.log.contains(Files.subjectToken))
    }
}
