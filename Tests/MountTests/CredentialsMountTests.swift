import Foundation
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

            init() async throws {
                let python = try MountEnv.variable("BUCKETFS_TEST_PYTHON")
                let script = try MountEnv.repo() + "/Tests/Servers/token_server.py"
                process = try Tools.Running(python, [script, "--port", "0"])
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

        static let target = "target@bucketfs-test.iam.gserviceaccount.com"

        /// gcloud's `authorized_user` file, with the server as its token_uri.
        static func userFile(_ server: TokenServer, _ dirs: Mount, quota: String) throws -> String {
            let path = dirs.base + "/application_default_credentials.json"
            let object: [String: Any] = [
                "type": "authorized_user", "client_id": "test-client.apps.googleusercontent.com",
                "client_secret": "test-client-secret", "refresh_token": "1//test-refresh-token",
                "token_uri": server.base + "/token", "quota_project_id": quota,
            ]
            try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: path))
            return path
        }

        /// Mounts with `options`, writes and lists, and returns what the
        /// bucket's server saw and `bucketfs status` said.
        static func mountAndUse(
            _ options: (TokenServer, Mount) throws -> [String]
        ) async throws -> (requests: [LoggedRequest], status: String, log: String) {
            let server = try await TokenServer()
            defer { server.stop() }
            let dirs = try Mount()
            defer { dirs.cleanup() }
            let bucket = "creds-\(UUID().uuidString.prefix(8).lowercased())"
            let gcs = try DirectGCS.fake(bucket: bucket)
            let mount = try await Mount.start(
                endpoint: try MountEnv.fake(), bucket: bucket, prefix: "", options: try options(server, dirs))
            defer { mount.cleanup() }
            try Data("hello\n".utf8).write(to: URL(fileURLWithPath: mount.at("new.txt")))
            _ = try FileManager.default.contentsOfDirectory(atPath: mount.path)
            let status = try await runBucketfs(["status", mount.path])
            #expect(status.ok, "\(status.summary)")
            let requests = try await gcs.requests().filter { $0.path.contains("/b/\(bucket)") }
            let log = (try? String(contentsOfFile: mount.logFile, encoding: .utf8)) ?? ""
            return (requests, status.out, log)
        }

        @Test("a gcloud authorized_user file: every request carries the user's token and the quota project; status names the user")
        func authorizedUser() async throws {
            let seen = try await Self.mountAndUse { server, dirs in
                ["--key-file", try Self.userFile(server, dirs, quota: "quota-user")]
            }
            #expect(seen.requests.count >= 3, "\(seen.requests)")
            for request in seen.requests {
                #expect(request.authorization?.hasPrefix("Bearer user-") == true, "\(request)")
                #expect(request.userProject == "quota-user", "\(request)")
            }
            let identity = "authorized user (client test-client.apps.googleusercontent.com)"
            #expect(seen.status.contains("credentials: \(identity)"), "\(seen.status)")
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
            #expect(seen.requests.count >= 3, "\(seen.requests)")
            for request in seen.requests {
                #expect(request.authorization?.hasPrefix("Bearer iam-") == true, "\(request)")
                #expect(request.authorization?.hasSuffix("-\(Self.target)") == true, "\(request)")
                #expect(request.userProject == "quota-user", "\(request)")
                #expect(request.parameter("userProject") == "payer", "\(request)")
            }
            #expect(seen.status.contains("credentials: impersonated service account \(Self.target)"), "\(seen.status)")
        }
    }
}

extension MountTests.CredentialFiles {
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
    static let audience = "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/test"

    @Test("an external_account file (file-sourced subject token): requests carry the STS token and the quota project")
    func externalAccount() async throws {
        let seen = try await Self.mountAndUse { server, dirs in
            let subject = dirs.base + "/subject-token"
            try Data("test-subject-token\n".utf8).write(to: URL(fileURLWithPath: subject))
            let file = dirs.base + "/external.json"
            let object: [String: Any] = [
                "type": "external_account", "audience": Self.audience,
                "subject_token_type": "urn:ietf:params:oauth:token-type:jwt", "token_url": server.base + "/sts",
                "credential_source": ["file": subject], "quota_project_id": "quota-ext",
            ]
            try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: file))
            return ["--key-file", file]
        }
        #expect(seen.requests.count >= 3, "\(seen.requests)")
        for request in seen.requests {
            #expect(request.authorization?.hasPrefix("Bearer sts-") == true, "\(request)")
            #expect(request.userProject == "quota-ext", "\(request)")
        }
        #expect(seen.status.contains("credentials: external account \(Self.audience)"), "\(seen.status)")
        #expect(!seen.log.contains("test-subject-token"))
    }

    @Test("an impersonated_service_account file: requests carry the IAM-minted token of its service account")
    func impersonatedServiceAccountFile() async throws {
        let seen = try await Self.mountAndUse { server, dirs in
            let user = try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: try Self.userFile(server, dirs, quota: "unused"))))
            let file = dirs.base + "/impersonated.json"
            let object: [String: Any] = [
                "type": "impersonated_service_account",
                "service_account_impersonation_url":
                    "\(server.base)/v1/projects/-/serviceAccounts/\(Self.target):generateAccessToken",
                "source_credentials": user, "delegates": [String](), "quota_project_id": "quota-imp",
            ]
            try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: file))
            return ["--key-file", file]
        }
        #expect(seen.requests.count >= 3, "\(seen.requests)")
        for request in seen.requests {
            #expect(request.authorization?.hasSuffix("-\(Self.target)") == true, "\(request)")
            #expect(request.userProject == "quota-imp", "\(request)")
        }
        #expect(seen.status.contains("credentials: impersonated service account \(Self.target)"), "\(seen.status)")
    }
}
