import BucketFSCLI
import Testing
@testable import CSIDriver

@Suite("CSI.VolumeSpec")
struct VolumeSpecTests {
    @Test("a volume id keeps bucket, prefix, endpoint and anonymous, and reads back the same")
    func volumeIDRoundTrip() throws {
        let spec = VolumeSpec(
            bucket: "my-bucket", prefix: "volumes/pvc-1", settings: ["endpoint": "http://127.0.0.1:9023", "anonymous": "true", "stat-ttl": "5"])
        let id = VolumeID(spec)
        #expect(id.description == "my-bucket/volumes/pvc-1?anonymous=true&endpoint=http://127.0.0.1:9023")
        let read = try #require(VolumeID(id.description))
        #expect(read == id)
        #expect(read.prefix == "volumes/pvc-1/")
        #expect(read.settings == ["endpoint": "http://127.0.0.1:9023", "anonymous": "true"])
    }

    @Test("static handles: a bucket, a bucket and prefix, a gs:// URL; an empty one is none")
    func staticHandles() {
        #expect(VolumeID("my-bucket").map { [$0.bucket, $0.prefix] } == ["my-bucket", ""])
        #expect(VolumeID("my-bucket/datasets/").map { [$0.bucket, $0.prefix] } == ["my-bucket", "datasets/"])
        #expect(VolumeID("gs://my-bucket/a/b").map { [$0.bucket, $0.prefix] } == ["my-bucket", "a/b/"])
        #expect(VolumeID("") == nil)
        #expect(VolumeID("/x") == nil)
    }

    @Test("parameters: bucket and prefix are the place, settings are checked as the mount checks them")
    func parameters() async throws {
        let spec = try await VolumeSpec.parse([
            "bucket": "my-bucket", "prefix": "/team/a/", "stat-ttl": "5", "csi.storage.k8s.io/pvc/name": "data",
        ])
        #expect(spec == VolumeSpec(bucket: "my-bucket", prefix: "team/a/", settings: ["stat-ttl": "5"]))
        #expect(spec.context == ["bucket": "my-bucket", "prefix": "team/a/", "stat-ttl": "5"])
    }

    static let refusals: [([String: String], String)] = [
        (["stat-ttl": "5"], "no bucket"),
        (["bucket": "Not_A_Bucket!"], "is not a bucket name"),
        (["bucket": "b-1", "prefix": "a/../b"], "not a usable prefix"),
        (["bucket": "b-1", "stat-tll": "5"], "stat-tll is not a bucketfs setting"),
        (["bucket": "b-1", "key-file": "/etc/shadow"], "key-file cannot be set on a volume"),
        (["bucket": "b-1", "cache-dir": "/"], "cache-dir cannot be set on a volume"),
        (["bucket": "b-1", "stat-ttl": "soon"], "stat-ttl"),
        (["bucket": "b-1", "endpoint": "nowhere"], "is not a URL"),
    ]

    @Test("refused parameters say which key", arguments: refusals)
    func refused(_ parameters: [String: String], _ message: String) async {
        do {
            _ = try await VolumeSpec.parse(parameters)
            Issue.record("accepted \(parameters)")
        } catch {
            #expect(error.description.contains(message), "\(error.description)")
        }
    }

    @Test("a static volume's handle names the bucket when its attributes do not")
    func staticVolume() async throws {
        let spec = try await VolumeSpec.parse(["stat-ttl": "30"], fallbackID: "my-bucket/datasets")
        #expect(spec == VolumeSpec(bucket: "my-bucket", prefix: "datasets/", settings: ["stat-ttl": "30"]))
    }

    @Test("the settings a volume takes are the mount's table less the reserved ones")
    func acceptedSettings() {
        let names = Set(VolumeSettings.names)
        #expect(names.isSuperset(of: ["stat-ttl", "negative-ttl", "cache-size", "uid", "gid", "file-mode", "dir-mode", "read-only", "endpoint", "anonymous"]))
        #expect(names.isDisjoint(with: VolumeSettings.refusedNames))
        #expect(Set(VolumeSpec.acceptedKeys) == names.union(["bucket", "prefix"]))
    }

    @Test("mount flags: ro, rw and settings with - or _")
    func mountFlags() throws {
        let flags = try MountFlags(["ro", "stat_ttl=5,negative-ttl=1", "allow-other"])
        #expect(flags.readOnly)
        #expect(flags.settings == ["stat-ttl": "5", "negative-ttl": "1", "allow-other": "true"])
    }

    @Test("secrets: key.json or token, not both, nothing else")
    func secrets() throws {
        #expect(try VolumeSecrets.parse([:]) == VolumeSecrets.none)
        #expect(try VolumeSecrets.parse(["token": " ya29.x\n"]) == .accessToken("ya29.x"))
        #expect(try VolumeSecrets.parse(["key.json": "{}"]) == .keyJSON("{}"))
        #expect(throws: VolumeSecretsError.self) { try VolumeSecrets.parse(["key.json": "{}", "token": "t"]) }
        #expect(throws: VolumeSecretsError.self) { try VolumeSecrets.parse(["keyjson": "{}"]) }
        #expect(throws: VolumeSecretsError.self) { try VolumeSecrets.parse(["token": "  "]) }
    }
}
