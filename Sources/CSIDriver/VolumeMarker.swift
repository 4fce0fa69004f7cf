import FSCore
import Foundation
import GRPCCore

/// The object that makes a prefix a volume: `PREFIX/` (zero bytes, the
/// placeholder bucketfs shows as the volume's root directory) with the
/// CreateVolume request that made it in its custom metadata. It is what
/// makes CreateVolume idempotent without a database (the same name and
/// request find it and get the same volume; another request finds it and
/// is ALREADY_EXISTS), and what DeleteVolume insists on before it deletes
/// anything: a prefix without it was not made by the driver.
struct VolumeMarker: Equatable {
    static let nameKey = "bucketfs-csi-volume"
    static let parametersKey = "bucketfs-csi-parameters"
    static let capacityKey = "bucketfs-csi-capacity"

    var name: String
    /// The StorageClass parameters, Kubernetes' own keys left out (those
    /// name the claim, which may be recreated under the same volume name).
    var parameters: [String: String]
    var capacity: Int64

    init(name: String, parameters: [String: String], capacity: Int64) {
        self.name = name
        self.parameters = parameters.filter { !$0.key.hasPrefix(VolumeSpec.kubernetesKeyPrefix) }
        self.capacity = capacity
    }

    init?(_ object: ObjectInfo) {
        guard let name = object.customMetadata[Self.nameKey],
              let data = object.customMetadata[Self.parametersKey]?.data(using: .utf8),
              let parameters = try? JSONDecoder().decode([String: String].self, from: data),
              let capacity = object.customMetadata[Self.capacityKey].flatMap(Int64.init)
        else { return nil }
        self.init(name: name, parameters: parameters, capacity: capacity)
    }

    var metadata: [String: String] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let parameters = (try? encoder.encode(parameters)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        return [Self.nameKey: name, Self.parametersKey: parameters, Self.capacityKey: String(capacity)]
    }

    /// A volume name bucketfs can serve as a directory name.
    static func checkName(_ name: String) throws(RPCError) {
        guard name != ".", name != "..", !name.contains("/"), !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }),
              name.utf8.count <= 255
        else { throw RPCError(code: .invalidArgument, message: "name \(name) cannot be a directory name (no /, no control characters, at most 255 bytes)") }
    }

    /// Writes the marker at `prefix` unless one is there (ifGenerationMatch
    /// 0, so two racing creates make one volume); an existing marker of
    /// the same request is success, another is ALREADY_EXISTS.
    ///
    /// The marker is looked up first: a server that ignores the
    /// precondition (the Python emulator does) must not let a second
    /// create overwrite the first one's marker.
    func create(at prefix: String, in store: any ObjectStore) async throws(RPCError) {
        var existing: ObjectInfo
        do {
            existing = try await store.stat(prefix)
        } catch .notFound {
            do {
                _ = try await store.put(prefix, from: nil, options: PutOptions(customMetadata: metadata, ifGenerationMatch: 0))
                return
            } catch .preconditionFailed {
                // Made between the lookup and the upload: compare with it.
                do {
                    existing = try await store.stat(prefix)
                } catch {
                    throw error.rpcError
                }
            } catch {
                throw error.rpcError
            }
        } catch {
            throw error.rpcError
        }
        guard let found = VolumeMarker(existing) else {
            throw RPCError(code: .alreadyExists, message: "\(prefix) exists in the bucket and is not a volume the driver made")
        }
        guard found == self else {
            throw RPCError(code: .alreadyExists, message: "volume \(name) exists with other parameters or capacity")
        }
    }

    /// Whether `prefix` holds a volume: its marker, or (for a static
    /// volume, or a whole bucket) any object under it.
    static func exists(prefix: String, in store: any ObjectStore) async throws(RPCError) -> Bool {
        do {
            if !prefix.isEmpty, (try? await store.stat(prefix)) != nil { return true }
            let page = try await store.listFlat(prefix: prefix, startOffset: nil, endOffset: nil, pageToken: nil, maxResults: 1)
            return !page.objects.isEmpty || prefix.isEmpty
        } catch .notFound, .bucketNotFound {
            return false
        } catch {
            throw error.rpcError
        }
    }

    /// Deletes every object under `prefix`, the marker last (so that a
    /// DeleteVolume cut short is finished by the CO's retry); a prefix
    /// without the driver's marker is left alone. Returns how many objects
    /// went.
    static func deleteVolume(at prefix: String, in store: any ObjectStore) async throws(RPCError) -> Int {
        do {
            let marker: ObjectInfo
            do {
                marker = try await store.stat(prefix)
            } catch .notFound, .bucketNotFound {
                return 0
            }
            guard VolumeMarker(marker) != nil else {
                throw RPCError(code: .failedPrecondition, message: "\(prefix) is not a volume the driver made; nothing was deleted")
            }
            var removed = 0
            var token: String?
            repeat {
                let page = try await store.listFlat(prefix: prefix, startOffset: nil, endOffset: nil, pageToken: token, maxResults: 1000)
                for object in page.objects where object.name != prefix {
                    do {
                        try await store.delete(object.name, ifGenerationMatch: nil)
                        removed += 1
                    } catch .notFound {}
                }
                token = page.nextPageToken
            } while token != nil
            do {
                try await store.delete(prefix, ifGenerationMatch: nil)
            } catch .notFound {}
            return removed + 1
        } catch let error as StoreError {
            throw error.rpcError
        } catch let error as RPCError {
            throw error
        } catch {
            throw RPCError(code: .internalError, message: "\(error)")
        }
    }
}
