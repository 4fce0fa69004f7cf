internal import CCurl
import Foundation
import Synchronization

/// Drives every transfer of one `HTTPTransport` with a single curl multi
/// handle on a dedicated thread, so no Swift concurrency thread ever blocks
/// in curl. The multi handle owns the connection cache: connections are kept
/// alive and reused across requests, HTTP/2 streams are multiplexed where the
/// server offers it, and the number of connections per host is bounded.
///
/// Threads: `submit` and `cancel` may be called from anywhere; they only
/// touch `inbox` (a Mutex) and wake the loop. Everything else, including the
/// `active` table and the multi handle, belongs to the loop thread.
final class CurlEngine: @unchecked Sendable {
    private struct Inbox {
        var added: [CurlTransfer] = []
        var cancelled: [CurlTransfer] = []
        /// Paused transfers whose growing file grew.
        var woken: [CurlTransfer] = []
    }

    private let multi: UnsafeMutableRawPointer
    private let inbox = Mutex(Inbox())
    /// In-flight transfers by easy handle. Loop thread only.
    private var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    /// The in-flight transfers whose body is a growing file. Loop thread only.
    private var growing: [UnsafeMutableRawPointer: CurlTransfer] = [:]

    init(maxConnectionsPerHost: Int) {
        CurlGlobal.initialize()
        guard let multi = curl_multi_init() else { fatalError("curl_multi_init failed: out of memory") }
        self.multi = multi
        sc_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, max(1, maxConnectionsPerHost))
        sc_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, max(1, maxConnectionsPerHost) * 4)
        sc_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        let thread = Thread { [self] in self.run() }
        thread.name = "bucketfs-curl"
        thread.start()
    }

    func submit(_ transfer: CurlTransfer) {
        // Weak: the transfer holds the file, the file this closure.
        transfer.growingFile?.onWake { [weak self, weak transfer] in
            guard let self, let transfer else { return }
            self.inbox.withLock { $0.woken.append(transfer) }
            curl_multi_wakeup(self.multi)
        }
        inbox.withLock { $0.added.append(transfer) }
        curl_multi_wakeup(multi)
    }

    func cancel(_ transfer: CurlTransfer) {
        transfer.cancelRequested.store(true, ordering: .releasing)
        inbox.withLock { $0.cancelled.append(transfer) }
        curl_multi_wakeup(multi)
    }

    private func run() {
        var running: Int32 = 0
        while true {
            let work = inbox.withLock { inbox -> Inbox in
                defer { inbox = Inbox() }
                return inbox
            }
            for transfer in work.added {
                if transfer.cancelRequested.load(ordering: .acquiring) {
                    transfer.finish(throwing: .cancelled)
                    continue
                }
                active[transfer.easy] = transfer
                let rc = curl_multi_add_handle(multi, transfer.easy)
                if rc != CURLM_OK {
                    active[transfer.easy] = nil
                    transfer.finish(throwing: .other(code: Int(rc.rawValue), message: String(cString: curl_multi_strerror(rc))))
                } else if transfer.growingFile != nil {
                    growing[transfer.easy] = transfer
                }
            }
            for transfer in work.cancelled where active[transfer.easy] != nil {
                end(transfer, throwing: .cancelled)
            }
            // The pause was set by the read callback during an earlier
            // perform on this thread, so resuming here comes after it.
            // CURLPAUSE_CONT is 0: neither direction paused.
            for transfer in work.woken where active[transfer.easy] != nil {
                curl_easy_pause(transfer.easy, 0)
            }
            for transfer in growing.values where transfer.growingFile?.waitedTooLong() == true {
                let waited = transfer.growingFile.map { HTTPTransport.rounded($0.maxWait) } ?? "?"
                end(transfer, throwing: .stalled("the request body waited longer than \(waited) for the file's next bytes"))
            }

            curl_multi_perform(multi, &running)
            var remaining: Int32 = 0
            while let message = curl_multi_info_read(multi, &remaining) {
                guard let easy = sc_msg_done_handle(message) else { continue }
                let code = sc_msg_result(message)
                curl_multi_remove_handle(multi, easy)
                growing[easy] = nil
                active.removeValue(forKey: easy)?.finish(code: code)
            }
            curl_multi_poll(multi, nil, 0, 1000, nil)
        }
    }

    /// Takes an in-flight transfer off the multi handle and fails it.
    private func end(_ transfer: CurlTransfer, throwing error: TransportError) {
        curl_multi_remove_handle(multi, transfer.easy)
        active[transfer.easy] = nil
        growing[transfer.easy] = nil
        transfer.finish(throwing: error)
    }
}

/// `curl_global_init` must run once, before any other thread uses curl.
enum CurlGlobal {
    private static let once: Void = {
        curl_global_init(Int(CURL_GLOBAL_ALL))
    }()

    static func initialize() { _ = once }

    /// The libcurl version string, for diagnostics.
    static var version: String { String(cString: sc_version()) }
}
