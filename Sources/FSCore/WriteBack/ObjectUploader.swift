import Foundation
import Logging

/// Stores the bytes of a staged file as an object, and nothing more: it
/// knows nothing of inodes, errno, journals or the recovery folder. The
/// caller hands it a plan (what to store, with which options, and the
/// stream that may already carry the bytes) and gets the stored object or
/// the store's last error.
///
/// A stream started while the file was written in order is finished if it
/// still carries exactly the content (then one metadata patch follows if
/// the metadata moved on meanwhile); otherwise, or if the stream fails, it
/// is abandoned and the whole file is put. A put failing for a transient
/// reason (the store's own retries spent: an outage, not a blip) is tried
/// again, with doubling waits, until `retryWindow` has passed since the
/// first attempt; every failed attempt is logged at warning, so an outage
/// shows in the log while it lasts. The precondition stays the same
/// throughout, so an attempt whose answer was lost but that did store the
/// object fails the next one with 412 rather than storing it twice.
///
/// `ParallelUploads.route` says how a file no stream carries goes up: near
/// the store, one request; a file large enough, far from it, in parts (a
/// `PartsStream` started while it was written is finished: its last part
/// and the compose; a single stream it may have is abandoned, as the parts
/// carry the bytes side by side, which one stream cannot); else the
/// store's usual upload.
struct ObjectUploader: Sendable {
    let store: any ObjectStore
    let parallel: ParallelUploads
    let retryWindow: Duration
    let logger: Logger

    /// Waits between put attempts: doubling from the first to the last
    /// (the transport has already waited within each attempt).
    static let firstWait: Duration = .milliseconds(500)
    static let maxWait: Duration = .seconds(10)

    struct Plan: Sendable {
        /// The object name.
        let name: String
        /// The local file holding the whole content.
        let localPath: String
        let options: PutOptions
        let size: Int64
        /// The stream started while the file was written (nil: none), and
        /// whether the content is still exactly the bytes it carries.
        let stream: TakenStream?
        let streamCarriesContent: Bool
        /// What asked for the upload (flush, fsync, release...), for the log.
        let reason: String
    }

    func upload(_ plan: Plan) async -> Result<ObjectInfo, StoreError> {
        let route = await parallel.route(size: plan.size)
        if let stream = plan.stream {
            if stream.stream.put is PartsStream || route != .parts {
                if let streamed = await finish(stream, plan) { return .success(streamed) }
            } else {
                _ = await stream.lastSend?.value
                await stream.stream.put.abandon()
            }
        }
        do {
            return .success(try await putPatiently(plan, route))
        } catch where route == .parts && parallel.fallsBack(after: error) {
            do {
                return .success(try await putPatiently(plan, .usual))
            } catch {
                return .failure(error)
            }
        } catch {
            return .failure(error)
        }
    }

    /// The object the stream stored, or nil (the stream is abandoned) if it
    /// cannot be used: the content moved away from it, or it failed.
    private func finish(_ taken: TakenStream, _ plan: Plan) async -> ObjectInfo? {
        let stream = taken.stream
        guard plan.streamCarriesContent, !taken.sendFailed else {
            await stream.put.abandon()
            return nil
        }
        if let send = taken.lastSend, case .failure = await send.value {
            await stream.put.abandon()
            return nil
        }
        let info: ObjectInfo
        do {
            info = try await stream.put.finish(size: plan.size, options: plan.options)
            if stream.put.storesOptionsAtFinish { return info }
        } catch {
            logger.warning("finishing the streaming upload failed; uploading the whole file", metadata: ["object": "\(plan.name)", "cause": "\(error)"])
            await stream.put.abandon()
            return nil
        }
        let metadata = plan.options.customMetadata
        guard metadata != stream.sentMetadata else { return info }
        var patch = MetadataPatch()
        patch.customMetadata = metadata
        for key in stream.sentMetadata.keys where metadata[key] == nil { patch.customMetadata[key] = .some(nil) }
        do {
            return try await store.patch(plan.name, patch, ifMetagenerationMatch: info.metageneration)
        } catch {
            // The bytes are stored; only the mtime or mode may lag behind.
            logger.warning("metadata after a streamed upload not updated", metadata: ["object": "\(plan.name)", "cause": "\(error)"])
            return info
        }
    }

    private func putPatiently(_ plan: Plan, _ route: ParallelUploads.Route) async throws(StoreError) -> ObjectInfo {
        let started = ContinuousClock.now
        var wait = Self.firstWait
        var attempt = 1
        while true {
            do {
                switch route {
                case .oneRequest: return try await store.putInOneRequest(plan.name, from: plan.localPath, options: plan.options)
                case .parts: return try await parallel.upload(plan.name, from: plan.localPath, size: plan.size, options: plan.options)
                case .usual: return try await store.put(plan.name, from: plan.localPath, options: plan.options)
                }
            } catch where error.isTransient {
                let elapsed = ContinuousClock.now - started
                guard elapsed + wait < retryWindow else { throw error }
                logger.warning("upload failing; retrying", metadata: [
                    "object": "\(plan.name)", "on": "\(plan.reason)", "attempt": "\(attempt)",
                    "failing for": "\(Int(elapsed.seconds)) s", "gives up after": "\(Int(retryWindow.seconds)) s", "cause": "\(error)",
                ])
                do {
                    try await Task.sleep(for: wait)
                } catch {
                    throw StoreError.cancelled
                }
                wait = min(wait * 2, Self.maxWait)
                attempt += 1
            }
        }
    }
}
