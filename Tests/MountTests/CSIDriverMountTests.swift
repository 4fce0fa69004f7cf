import CSIDriver
import Foundation
import TestServerClient
import GRPCCore
import GRPCProtobuf
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// The CSI driver as kubelet and csi-provisioner use it: a gRPC client
    /// drives the real `bucketfs csi` over its Unix socket; volumes are
    /// mounted for real (fuse-fd-mount, served as an unprivileged user)
    /// and checked through the server's API.
    @Suite struct CSIDriver {
        /// Where a test's volumes live: a fresh fake-gcs-server bucket, or
        /// the emulator's bucket under a fresh parent prefix.
        struct Backend: Sendable, CustomStringConvertible {
            let gcs: DirectGCS
            let parameters: [String: String]
            let description: String

            static func fakeGCSServer(_ label: String) async throws -> Backend {
                let gcs = try await DirectGCS.fakeGCSServer(newBucket: MountEnv.uniquePrefix(label))
                return Backend(
                    gcs: gcs, parameters: ["bucket": gcs.bucket, "endpoint": gcs.base, "anonymous": "true", "stat-ttl": "1"],
                    description: "fake-gcs-server")
            }

            static func emulator(_ label: String) throws -> Backend {
                let gcs = try DirectGCS.emulator()
                return Backend(
                    gcs: gcs,
                    parameters: ["bucket": gcs.bucket, "prefix": MountEnv.uniquePrefix(label), "endpoint": gcs.base, "anonymous": "true", "stat-ttl": "1"],
                    description: "gcp-storage-emulator")
            }
        }

        @Test("Identity, capabilities and node info; RPCs the driver does not offer are UNIMPLEMENTED", .timeLimit(.minutes(2)))
        func identity() async throws {
            let plugin = try await CSIPlugin()
            defer { plugin.cleanup() }
            try await plugin.withClients { csi in
                let info = try await csi.identity.getPluginInfo(.init())
                #expect(info.name == "csi.bucketfs.dev")
                #expect(info.vendorVersion == "0.1.0")
                let capabilities = try await csi.identity.getPluginCapabilities(.init())
                #expect(capabilities.capabilities.map(\.service.type) == [.controllerService])
                #expect(try await csi.identity.probe(.init()).ready.value == true)
                let controller = try await csi.controller.controllerGetCapabilities(.init())
                #expect(controller.capabilities.map(\.rpc.type) == [.createDeleteVolume])
                #expect(try await csi.node.nodeGetCapabilities(.init()).capabilities.isEmpty)
                #expect(try await csi.node.nodeGetInfo(.init()).nodeID == "test-node")

                // Methods of the spec this driver leaves out: the server's own answer.
                for method in ["csi.v1.Controller/ListVolumes", "csi.v1.Controller/ControllerPublishVolume", "csi.v1.Node/NodeStageVolume",
                               "csi.v1.Node/NodeGetVolumeStats", "csi.v1.Controller/CreateSnapshot"] {
                    let parts = method.split(separator: "/")
                    let descriptor = MethodDescriptor(fullyQualifiedService: String(parts[0]), method: String(parts[1]))
                    let code = await CSIRequests.code {
                        _ = try await csi.raw.unary(
                            request: ClientRequest(message: Csi_V1_ProbeRequest()), descriptor: descriptor,
                            serializer: ProtobufSerializer<Csi_V1_ProbeRequest>(),
                            deserializer: ProtobufDeserializer<Csi_V1_ProbeResponse>(), options: .defaults
                        ) { try $0.message }
                    }
                    #expect(code == .unimplemented, "\(method)")
                }
            }
        }

        @Test("Every request's required fields are checked, with the codes csi-sanity expects", .timeLimit(.minutes(2)))
        func validation() async throws {
            let plugin = try await CSIPlugin()
            defer { plugin.cleanup() }
            let good = ["bucket": "some-bucket", "endpoint": "http://127.0.0.1:9", "anonymous": "true"]
            try await plugin.withClients { csi in
                typealias Row = (String, RPCError.Code?, () async throws -> Void)
                let target = plugin.target("validation")
                let rows: [Row] = [
                    ("CreateVolume without a name", .invalidArgument, { _ = try await csi.controller.createVolume(CSIRequests.create("", parameters: good)) }),
                    ("CreateVolume without capabilities", .invalidArgument, {
                        var request = CSIRequests.create("v", parameters: good)
                        request.volumeCapabilities = []
                        _ = try await csi.controller.createVolume(request)
                    }),
                    ("CreateVolume of a block volume", .invalidArgument, {
                        var request = CSIRequests.create("v", parameters: good)
                        request.volumeCapabilities = [.with { $0.block = .init(); $0.accessMode = .with { $0.mode = .singleNodeWriter } }]
                        _ = try await csi.controller.createVolume(request)
                    }),
                    ("CreateVolume without an access mode", .invalidArgument, {
                        var request = CSIRequests.create("v", parameters: good)
                        request.volumeCapabilities = [.with { $0.mount = .init() }]
                        _ = try await csi.controller.createVolume(request)
                    }),
                    ("CreateVolume without a bucket", .invalidArgument, { _ = try await csi.controller.createVolume(CSIRequests.create("v", parameters: ["stat-ttl": "5"])) }),
                    ("CreateVolume with an unknown parameter", .invalidArgument, {
                        _ = try await csi.controller.createVolume(CSIRequests.create("v", parameters: good.merging(["stat-tll": "5"]) { a, _ in a }))
                    }),
                    ("CreateVolume naming a key file", .invalidArgument, {
                        _ = try await csi.controller.createVolume(CSIRequests.create("v", parameters: good.merging(["key-file": "/etc/shadow"]) { a, _ in a }))
                    }),
                    ("CreateVolume with a bad value", .invalidArgument, {
                        _ = try await csi.controller.createVolume(CSIRequests.create("v", parameters: good.merging(["stat-ttl": "later"]) { a, _ in a }))
                    }),
                    ("CreateVolume with a limit below the requirement", .outOfRange, {
                        var request = CSIRequests.create("v", parameters: good)
                        request.capacityRange = .with { $0.requiredBytes = 10; $0.limitBytes = 5 }
                        _ = try await csi.controller.createVolume(request)
                    }),
                    ("CreateVolume from a snapshot", .invalidArgument, {
                        var request = CSIRequests.create("v", parameters: good)
                        request.volumeContentSource = .with { $0.snapshot = .with { $0.snapshotID = "s" } }
                        _ = try await csi.controller.createVolume(request)
                    }),
                    ("DeleteVolume without an id", .invalidArgument, { _ = try await csi.controller.deleteVolume(.init()) }),
                    ("DeleteVolume of an id that names nothing", nil, { _ = try await csi.controller.deleteVolume(.with { $0.volumeID = "no such volume" }) }),
                    ("ValidateVolumeCapabilities without an id", .invalidArgument, {
                        _ = try await csi.controller.validateVolumeCapabilities(.with { $0.volumeCapabilities = [CSIRequests.mountCapability()] })
                    }),
                    ("ValidateVolumeCapabilities without capabilities", .invalidArgument, {
                        _ = try await csi.controller.validateVolumeCapabilities(.with { $0.volumeID = "b" })
                    }),
                    ("NodePublishVolume without a volume id", .invalidArgument, {
                        var request = CSIRequests.publish(.with { $0.volumeContext = good }, target: target)
                        request.volumeID = ""
                        _ = try await csi.node.nodePublishVolume(request)
                    }),
                    ("NodePublishVolume without a target", .invalidArgument, {
                        _ = try await csi.node.nodePublishVolume(CSIRequests.publish(.with { $0.volumeID = "v"; $0.volumeContext = good }, target: ""))
                    }),
                    ("NodePublishVolume with a relative target", .invalidArgument, {
                        _ = try await csi.node.nodePublishVolume(CSIRequests.publish(.with { $0.volumeID = "v"; $0.volumeContext = good }, target: "pods/x"))
                    }),
                    ("NodePublishVolume without a capability", .invalidArgument, {
                        var request = CSIRequests.publish(.with { $0.volumeID = "v"; $0.volumeContext = good }, target: target)
                        request.clearVolumeCapability()
                        _ = try await csi.node.nodePublishVolume(request)
                    }),
                    ("NodePublishVolume with an unknown secret key", .invalidArgument, {
                        _ = try await csi.node.nodePublishVolume(CSIRequests.publish(
                            .with { $0.volumeID = "v"; $0.volumeContext = good }, target: target, secrets: ["password": "x"]))
                    }),
                    ("NodeUnpublishVolume without a volume id", .invalidArgument, { _ = try await csi.node.nodeUnpublishVolume(CSIRequests.unpublish("", target: target)) }),
                    ("NodeUnpublishVolume without a target", .invalidArgument, { _ = try await csi.node.nodeUnpublishVolume(CSIRequests.unpublish("v", target: "")) }),
                    ("NodeUnpublishVolume of a target never published", nil, { _ = try await csi.node.nodeUnpublishVolume(CSIRequests.unpublish("v", target: target)) }),
                ]
                for (name, expected, call) in rows {
                    let code = await CSIRequests.code(call)
                    #expect(code == expected, "\(name): \(code.map { "\($0)" } ?? "OK")")
                }
                #expect(!Kernel.isMounted(target) && !FileManager.default.fileExists(atPath: target), "nothing was mounted or made")
            }
        }

        @Test("CreateVolume, publish, write and read by another process, unpublish, republish, DeleteVolume (fake-gcs-server)", .timeLimit(.minutes(3)))
        func lifecycleOnFakeGCSServer() async throws {
            try await lifecycle(try await Backend.fakeGCSServer("csi-life"))
        }

        @Test("CreateVolume, publish, write and read by another process, unpublish, republish, DeleteVolume (emulator)", .timeLimit(.minutes(3)))
        func lifecycleOnEmulator() async throws {
            try await lifecycle(try Backend.emulator("csi-life"))
        }

        func lifecycle(_ backend: Backend) async throws {
            let plugin = try await CSIPlugin()
            defer { plugin.cleanup() }
            let gcs = backend.gcs
            let name = "pvc-\(UUID().uuidString.prefix(8).lowercased())"
            let parent = backend.parameters["prefix"].map { $0 + "/" } ?? ""
            try await plugin.withClients { csi in
                let created = try await csi.controller.createVolume(CSIRequests.create(name, parameters: backend.parameters))
                let volume = created.volume
                #expect(volume.volumeID.hasPrefix("\(gcs.bucket)/\(parent)\(name)?"), "\(volume.volumeID)")
                #expect(volume.capacityBytes == 1 << 30)
                #expect(volume.volumeContext["bucket"] == gcs.bucket && volume.volumeContext["prefix"] == "\(parent)\(name)/")
                // The marker, seen through the server's API.
                let marker = try #require(try await gcs.resource("\(parent)\(name)/"), "no marker object on \(backend)")
                #expect((marker["metadata"] as? [String: String])?["bucketfs-csi-volume"] == name, "\(marker)")

                // Idempotent by name; the same name with other parameters or capacity is ALREADY_EXISTS.
                let again = try await csi.controller.createVolume(CSIRequests.create(name, parameters: backend.parameters))
                #expect(again.volume == volume)
                let otherSize = await CSIRequests.code {
                    _ = try await csi.controller.createVolume(CSIRequests.create(name, parameters: backend.parameters, requiredBytes: 5))
                }
                #expect(otherSize == .alreadyExists)
                let otherParameters = await CSIRequests.code {
                    _ = try await csi.controller.createVolume(CSIRequests.create(
                        name, parameters: backend.parameters.merging(["stat-ttl": "9"]) { _, new in new }))
                }
                #expect(otherParameters == .alreadyExists)
                let validated = try await csi.controller.validateVolumeCapabilities(.with {
                    $0.volumeID = volume.volumeID
                    $0.volumeCapabilities = [CSIRequests.mountCapability()]
                })
                #expect(validated.confirmed.volumeCapabilities == [CSIRequests.mountCapability()])

                // Publish; another process writes and reads through the target.
                let first = plugin.target("first")
                _ = try await csi.node.nodePublishVolume(CSIRequests.publish(volume, target: first))
                #expect(Kernel.isMounted(first), "not mounted\n\(plugin.log)")
                let server = try #require(Kernel.bucketfsProcess(serving: first), "no bucketfs process serves \(first)")
                #expect(FuseDescriptor.ids(server, "Uid") == Array(repeating: "\(CSIPlugin.uid)", count: 4), "served unprivileged")
                let content = "written in a pod \(UUID().uuidString)\n"
                let write = try await Tools.run("/bin/sh", ["-c", "printf '%s' '\(content)' > \(first)/hello.txt && cat \(first)/hello.txt"])
                #expect(write.ok && write.out == content, "\(write.summary)")
                try await ObjectChecks.expect(gcs, "\(parent)\(name)/hello.txt", holds: Data(content.utf8), "after the shell closed it")

                // The same publish again is success and changes nothing.
                _ = try await csi.node.nodePublishVolume(CSIRequests.publish(volume, target: first))
                #expect(Kernel.bucketfsProcess(serving: first) == server, "a repeated publish must not mount again")
                let readOnlyOverIt = await CSIRequests.code {
                    _ = try await csi.node.nodePublishVolume(CSIRequests.publish(volume, target: first, readOnly: true))
                }
                #expect(readOnlyOverIt == .alreadyExists)

                _ = try await csi.node.nodeUnpublishVolume(CSIRequests.unpublish(volume.volumeID, target: first))
                #expect(!Kernel.isMounted(first) && !FileManager.default.fileExists(atPath: first), "target left behind")
                _ = try await csi.node.nodeUnpublishVolume(CSIRequests.unpublish(volume.volumeID, target: first))

                // A second publish, elsewhere, sees the file.
                let second = plugin.target("second")
                _ = try await csi.node.nodePublishVolume(CSIRequests.publish(volume, target: second))
                let read = try await Tools.run("/bin/cat", ["\(second)/hello.txt"])
                #expect(read.ok && read.out == content, "\(read.summary)")
                _ = try await csi.node.nodeUnpublishVolume(CSIRequests.unpublish(volume.volumeID, target: second))
                #expect(!Kernel.isMounted(second))

                _ = try await csi.controller.deleteVolume(.with { $0.volumeID = volume.volumeID })
                #expect(try await gcs.list(prefix: "\(parent)\(name)/").isEmpty, "the volume's prefix is not empty")
                _ = try await csi.controller.deleteVolume(.with { $0.volumeID = volume.volumeID })
                let gone = await CSIRequests.code {
                    _ = try await csi.controller.validateVolumeCapabilities(.with {
                        $0.volumeID = volume.volumeID
                        $0.volumeCapabilities = [CSIRequests.mountCapability()]
                    })
                }
                #expect(gone == .notFound)
            }
        }

        @Test("A read-only publish refuses writes with EROFS; the reader-only access modes publish read-only", .timeLimit(.minutes(2)))
        func readOnly() async throws {
            let backend = try await Backend.fakeGCSServer("csi-ro")
            try await backend.gcs.put("present.txt", Data("here\n".utf8))
            let plugin = try await CSIPlugin()
            defer { plugin.cleanup() }
            let volume = Csi_V1_Volume.with {
                $0.volumeID = backend.gcs.bucket
                $0.volumeContext = backend.parameters.filter { $0.key != "bucket" }
            }
            try await plugin.withClients { csi in
                for (label, request) in [
                    ("readonly", CSIRequests.publish(volume, target: plugin.target("ro"), readOnly: true)),
                    ("reader-only mode", CSIRequests.publish(volume, target: plugin.target("reader"), capability: CSIRequests.mountCapability(.multiNodeReaderOnly))),
                ] {
                    _ = try await csi.node.nodePublishVolume(request)
                    let write = try await Tools.run("/bin/sh", ["-c", "printf x > \(request.targetPath)/new.txt"])
                    #expect(!write.ok && write.stderr.contains("Read-only file system"), "\(label): \(write.summary)")
                    let read = try await Tools.run("/bin/cat", ["\(request.targetPath)/present.txt"])
                    #expect(read.ok && read.out == "here\n", "\(label): \(read.summary)")
                    _ = try await csi.node.nodeUnpublishVolume(CSIRequests.unpublish(volume.volumeID, target: request.targetPath))
                }
            }
            #expect(try await backend.gcs.resource("new.txt") == nil, "a write got through")
        }

        @Test("A mount process killed under a published target: republish mounts again, unpublish leaves no mount", .timeLimit(.minutes(2)))
        func killedMountProcess() async throws {
            let backend = try await Backend.fakeGCSServer("csi-kill")
            let plugin = try await CSIPlugin()
            defer { plugin.cleanup() }
            let volume = Csi_V1_Volume.with { $0.volumeID = backend.gcs.bucket; $0.volumeContext = backend.parameters }
            let target = plugin.target("killed")
            try await plugin.withClients { csi in
                for round in ["republish", "unpublish"] {
                    _ = try await csi.node.nodePublishVolume(CSIRequests.publish(volume, target: target))
                    let server = try #require(Kernel.bucketfsProcess(serving: target), "\(round): no process serves \(target)")
                    kill(server, SIGKILL)
                    var info = stat()
                    var disconnected = false
                    for _ in 0..<100 where !disconnected {
                        disconnected = stat(target, &info) != 0 && errno == ENOTCONN
                        if !disconnected { try await Task.sleep(for: .milliseconds(50)) }
                    }
                    #expect(disconnected, "\(round): the dead mount should answer ENOTCONN")
                    if round == "republish" {
                        _ = try await csi.node.nodePublishVolume(CSIRequests.publish(volume, target: target))
                        #expect(stat(target, &info) == 0, "republish serves again: \(String(cString: strerror(errno)))")
                        #expect(Kernel.mountpoints().filter { $0 == target }.count == 1, "one mount, not one over the dead one")
                    }
                    _ = try await csi.node.nodeUnpublishVolume(CSIRequests.unpublish(volume.volumeID, target: target))
                    #expect(!Kernel.isMounted(target), "\(round): still mounted")
                    #expect(!FileManager.default.fileExists(atPath: target), "\(round): target left behind")
                }
            }
        }

        @Test("bucketfs csi runs bucketfs-csi: its help and version; a bad endpoint is a bad command line")
        func commandLine() async throws {
            let help = try await Tools.run(try MountEnv.binary(), ["csi", "--help"])
            #expect(help.ok && help.out.contains("USAGE: bucketfs csi --endpoint") && help.out.contains("--mount-uid"), "\(help.summary)")
            let version = try await Tools.run(try MountEnv.binary(), ["csi", "--version"])
            #expect(version.ok && version.out == "0.1.0\n", "\(version.summary) \(version.out)")
            let bad = try await Tools.run(try MountEnv.binary(), ["csi", "--endpoint", "tcp://127.0.0.1:1", "--node-id", "n"])
            #expect(bad.status == 64 && bad.stderr.contains("is not unix:///PATH"), "\(bad.summary)")
        }

        @Test("bucketfs itself links no gRPC and no protobuf: only bucketfs-csi does")
        func mountBinaryHasNoGRPC() throws {
            let mount = try Data(contentsOf: URL(fileURLWithPath: try MountEnv.binary()), options: .alwaysMapped)
            let driver = try Data(
                contentsOf: URL(fileURLWithPath: try MountEnv.builtExecutable("bucketfs-csi", buildCommand: "swift build --build-tests")),
                options: .alwaysMapped)
            for module in ["GRPCCore", "SwiftProtobuf", "NIOHTTP2"] {
                #expect(mount.range(of: Data(module.utf8)) == nil, "bucketfs contains \(module)")
                #expect(driver.range(of: Data(module.utf8)) != nil, "bucketfs-csi lacks \(module): the check looks for the wrong names")
            }
        }

        /// The two kinds of secret, each against fake_gcs.py refusing
        /// anonymous requests (as Cloud Storage does for a private bucket),
        /// so a request that went through carried the secret's credentials.
        enum SecretKind: String, CaseIterable, Sendable {
            case token, keyJSON
        }

        @Test("A secret's credentials reach CreateVolume and the mount, and no log, command line or cache file", .timeLimit(.minutes(2)),
              arguments: SecretKind.allCases)
        func secretsStayPrivate(_ kind: SecretKind) async throws {
            let gcs = try DirectGCS.fake(bucket: "csi-secret-\(UUID().uuidString.prefix(8).lowercased())")
            try await MountTests.CredentialFiles.refuseAnonymous(gcs)
            let tokens = try await MountTests.CredentialFiles.TokenServer()
            defer { tokens.stop() }
            let plugin = try await CSIPlugin()
            defer { plugin.cleanup() }
            // What must never leak, and the bearer the server must see.
            let secret: String
            let secrets: [String: String]
            let bearer: String
            switch kind {
            case .token:
                secret = "ya29.test-secret-\(UUID().uuidString)"
                secrets = ["token": secret]
                bearer = "Bearer \(secret)"
            case .keyJSON:
                // token_server.py grants this refresh token only.
                secret = GoogleCredentialFiles.refreshToken
                let file = GoogleCredentialFiles.authorizedUser(base: tokens.base)
                secrets = ["key.json": String(decoding: try JSONSerialization.data(withJSONObject: file), as: UTF8.self)]
                bearer = "Bearer user-"
            }
            try await plugin.withClients { csi in
                var create = CSIRequests.create("pvc-secret", parameters: ["bucket": gcs.bucket, "endpoint": gcs.base])
                create.secrets = secrets
                let volume = try await csi.controller.createVolume(create).volume
                let target = plugin.target("secret")
                _ = try await csi.node.nodePublishVolume(CSIRequests.publish(volume, target: target, secrets: secrets))
                let write = try await Tools.run("/bin/sh", ["-c", "printf 'with a secret' > \(target)/t.txt"])
                #expect(write.ok, "\(write.summary)")
                let requests = try await gcs.requests().filter { $0.path.contains("/b/\(gcs.bucket)") }
                #expect(requests.count >= 3 && requests.allSatisfy { $0.authorization?.hasPrefix(bearer) == true }, "\(requests)")
                #expect(requests.contains { $0.method == "POST" && $0.path.contains("/upload/") }, "the write was uploaded: \(requests)")

                // The secret file: the mount user's alone, in the state directory.
                let files = try FileManager.default.subpathsOfDirectory(atPath: plugin.stateDirectory + "/secrets")
                let secretFile = try #require(files.first { $0.hasSuffix("/token") || $0.hasSuffix("/key.json") }, "\(files)")
                var info = stat()
                #expect(stat(plugin.stateDirectory + "/secrets/" + secretFile, &info) == 0)
                #expect(info.st_uid == CSIPlugin.uid && info.st_mode & 0o777 == 0o600, "owner \(info.st_uid), mode \(String(info.st_mode & 0o777, radix: 8))")

                // Nowhere else: any process's command line, the plugin's log, the mount logs, the cache.
                for pid in Kernel.allPIDs() {
                    let arguments = (Kernel.arguments(of: pid) ?? []).joined(separator: " ")
                    #expect(!arguments.contains(secret), "the secret is on the command line of \(pid): \(arguments)")
                }
                #expect(!plugin.log.contains(secret), "the plugin's log holds the secret")
                for directory in [plugin.stateDirectory + "/logs", plugin.cacheRoot] {
                    for file in try FileManager.default.subpathsOfDirectory(atPath: directory) {
                        let data = FileManager.default.contents(atPath: directory + "/" + file) ?? Data()
                        #expect(data.range(of: Data(secret.utf8)) == nil, "\(directory)/\(file) holds the secret")
                    }
                }
                _ = try await csi.node.nodeUnpublishVolume(CSIRequests.unpublish(volume.volumeID, target: target))
                let left = try FileManager.default.subpathsOfDirectory(atPath: plugin.stateDirectory + "/secrets")
                #expect(left.isEmpty, "secrets left after unpublish: \(left)")
                var delete = Csi_V1_DeleteVolumeRequest.with { $0.volumeID = volume.volumeID }
                delete.secrets = secrets
                _ = try await csi.controller.deleteVolume(delete)
                // The bucket refuses anonymous listings: the log shows the deletes, with the secret's bearer.
                let deletes = try await gcs.requests().filter { $0.method == "DELETE" && $0.path.contains("/b/\(gcs.bucket)/o/") }
                #expect(deletes.count == 2 && deletes.allSatisfy { $0.authorization?.hasPrefix(bearer) == true }, "t.txt and the marker: \(deletes)")
            }
        }
    }
}
