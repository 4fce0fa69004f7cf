import Foundation
import Testing
import Yams
@testable import CSIDriver

/// What can be checked of deploy/kubernetes without a cluster: every file
/// parses; the driver name is the same in the CSIDriver object, the node
/// plugin's arguments, the StorageClasses, the volumes and GetPluginInfo's
/// default; the registrar's registration path is the plugin's socket as
/// the node sees it; and every parameter, attribute and mount flag of the
/// examples is one the driver accepts with the values given.
@Suite("CSI.DeployManifests")
struct DeployManifestTests {
    static let deploy = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("deploy/kubernetes")

    /// Every YAML document under deploy/kubernetes, with its file.
    static func documents() throws -> [(file: String, object: [String: Any])] {
        let files = try FileManager.default.subpathsOfDirectory(atPath: deploy.path)
            .filter { $0.hasSuffix(".yaml") || $0.hasSuffix(".yml") }.sorted()
        var documents: [(String, [String: Any])] = []
        for file in files {
            let text = try String(contentsOf: deploy.appendingPathComponent(file), encoding: .utf8)
            for document in try Yams.load_all(yaml: text) {
                guard let object = document as? [String: Any] else {
                    if document != nil { Issue.record("\(file): a document that is not a mapping") }
                    continue
                }
                documents.append((file, object))
            }
        }
        return documents
    }

    static func objects(_ kind: String, in documents: [(file: String, object: [String: Any])]) -> [(file: String, object: [String: Any])] {
        documents.filter { $0.object["kind"] as? String == kind }
    }

    static func value(_ object: Any?, _ path: String...) -> Any? {
        path.reduce(object) { ($0 as? [String: Any])?[$1] }
    }

    static func containers(_ workload: [String: Any]) -> [[String: Any]] {
        value(workload, "spec", "template", "spec", "containers") as? [[String: Any]] ?? []
    }

    static func argument(_ container: [String: Any], _ name: String) -> String? {
        let arguments = (container["args"] as? [String] ?? []) + (container["command"] as? [String] ?? [])
        return arguments.first { $0.hasPrefix("--\(name)=") }.map { String($0.dropFirst(name.count + 3)) }
    }

    @Test("the manifests parse, and name one driver everywhere")
    func oneDriverName() throws {
        let documents = try Self.documents()
        #expect(!documents.isEmpty)
        let drivers = Self.objects("CSIDriver", in: documents)
        #expect(drivers.count == 1)
        let name = try #require(Self.value(drivers.first?.object, "metadata", "name") as? String)
        #expect(name == IdentityService.defaultDriverName, "GetPluginInfo's default")
        #expect(Self.value(drivers.first?.object, "spec", "attachRequired") as? Bool == false)
        #expect(Self.value(drivers.first?.object, "spec", "podInfoOnMount") as? Bool == true)
        #expect(Set(Self.value(drivers.first?.object, "spec", "volumeLifecycleModes") as? [String] ?? []) == ["Persistent", "Ephemeral"])

        let plugins = (Self.objects("DaemonSet", in: documents) + Self.objects("Deployment", in: documents))
            .flatMap { Self.containers($0.object) }.filter { ($0["args"] as? [String] ?? []).contains("csi") || ($0["command"] as? [String] ?? []).contains("csi") }
        #expect(plugins.count == 2, "the node and the controller plugin")
        for plugin in plugins {
            #expect(Self.argument(plugin, "driver-name") == name, "\(plugin["name"] ?? "?")")
            let endpoint = Self.argument(plugin, "endpoint")
            #expect(endpoint?.hasPrefix("unix:///") == true, "\(endpoint ?? "no --endpoint")")
        }
        for storageClass in Self.objects("StorageClass", in: documents) {
            #expect(storageClass.object["provisioner"] as? String == name, "\(storageClass.file)")
        }
        for volume in Self.csiVolumes(documents) {
            #expect(volume.source["driver"] as? String == name, "\(volume.file)")
        }
    }

    @Test("the registrar registers the socket the node plugin serves")
    func registrationPath() throws {
        let documents = try Self.documents()
        let node = try #require(Self.objects("DaemonSet", in: documents).first).object
        let containers = Self.containers(node)
        let plugin = try #require(containers.first { ($0["args"] as? [String] ?? []).contains("csi") || ($0["command"] as? [String] ?? []).contains("csi") })
        let registrar = try #require(containers.first { ($0["image"] as? String ?? "").contains("csi-node-driver-registrar") })
        let endpoint = try #require(Self.argument(plugin, "endpoint"))
        let socket = String(endpoint.dropFirst("unix://".count))
        #expect(Self.argument(registrar, "csi-address") == socket, "the registrar talks to the plugin's socket")
        // The socket's directory, as the node sees it: the hostPath volume mounted there.
        let socketDirectory = (socket as NSString).deletingLastPathComponent
        let mounts = plugin["volumeMounts"] as? [[String: Any]] ?? []
        let volumeName = try #require(mounts.first { $0["mountPath"] as? String == socketDirectory }?["name"] as? String)
        let volumes = Self.value(node, "spec", "template", "spec", "volumes") as? [[String: Any]] ?? []
        let hostPath = try #require(Self.value(volumes.first { $0["name"] as? String == volumeName }, "hostPath", "path") as? String)
        let registration = try #require(Self.argument(registrar, "kubelet-registration-path"))
        #expect(registration == hostPath + "/" + (socket as NSString).lastPathComponent)
        // kubelet's pods directory reaches the plugin with Bidirectional propagation, or mounts stay invisible to pods.
        #expect(mounts.contains { $0["mountPropagation"] as? String == "Bidirectional" && ($0["mountPath"] as? String ?? "").hasPrefix("/var/lib/kubelet") })
        #expect(Self.value(plugin, "securityContext", "privileged") as? Bool == true)
    }

    /// Every CSI volume source of the examples: persistent volumes' `csi`
    /// and pods' inline `csi` volumes.
    static func csiVolumes(_ documents: [(file: String, object: [String: Any])]) -> [(file: String, source: [String: Any], mountOptions: [String])] {
        var found: [(String, [String: Any], [String])] = []
        for pv in objects("PersistentVolume", in: documents) {
            if let csi = value(pv.object, "spec", "csi") as? [String: Any] {
                found.append((pv.file, csi, value(pv.object, "spec", "mountOptions") as? [String] ?? []))
            }
        }
        for pod in objects("Pod", in: documents) {
            for volume in value(pod.object, "spec", "volumes") as? [[String: Any]] ?? [] {
                if let csi = volume["csi"] as? [String: Any] { found.append((pod.file, csi, [])) }
            }
        }
        return found
    }

    @Test("every parameter, attribute and mount flag of the examples is accepted with its value")
    func examplesAreAccepted() async throws {
        let documents = try Self.documents()
        let classes = Self.objects("StorageClass", in: documents)
        #expect(!classes.isEmpty)
        for storageClass in classes {
            let parameters = storageClass.object["parameters"] as? [String: String] ?? [:]
            do {
                _ = try await VolumeSpec.parse(parameters)
            } catch {
                Issue.record("\(storageClass.file): \(error.description)")
            }
            _ = try MountFlags(storageClass.object["mountOptions"] as? [String] ?? [])
        }
        let volumes = Self.csiVolumes(documents)
        #expect(volumes.count >= 2, "a static volume and an inline one")
        for volume in volumes {
            let attributes = volume.source["volumeAttributes"] as? [String: String] ?? [:]
            let flags = try MountFlags(volume.mountOptions)
            do {
                _ = try await VolumeSpec.parse(attributes.merging(flags.settings) { _, flag in flag }, fallbackID: volume.source["volumeHandle"] as? String)
            } catch {
                Issue.record("\(volume.file): \(error.description)")
            }
        }
    }
}
