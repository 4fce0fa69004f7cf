import CoreMetrics
import FlyingFox
import FlyingSocks
import Foundation
import FSCore
import Logging
import Prometheus

/// `--metrics-address HOST:PORT`: Prometheus text format on GET /metrics.
///
/// The counters and histograms come from swift-metrics calls in the layers
/// (FUSE requests in FuseBridge, HTTP in Transport, bytes and block cache
/// in FSCore), recorded by swift-prometheus once `bootstrap` has run; the
/// gauges are read from the filesystem's status at each scrape, so they
/// are exact without bookkeeping on the hot paths.
final class MetricsEndpoint: Sendable {
    /// Where to listen, parsed from `HOST:PORT` (IPv4 or a name that
    /// resolves to loopback) or `[IPv6]:PORT`.
    struct Address: Sendable, CustomStringConvertible {
        let host: String
        let port: UInt16
        let isIPv6: Bool

        init(_ text: String) throws {
            let hostPart: Substring
            let portPart: Substring
            if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
                hostPart = text[text.index(after: text.startIndex)..<close]
                portPart = text[close...].dropFirst().drop { $0 == ":" }
                isIPv6 = true
            } else if let colon = text.lastIndex(of: ":") {
                hostPart = text[..<colon]
                portPart = text[text.index(after: colon)...]
                isIPv6 = false
            } else {
                throw CLIError.usage("--metrics-address \(text): expected HOST:PORT, e.g. 127.0.0.1:9464")
            }
            guard let port = UInt16(portPart), port > 0 else {
                throw CLIError.usage("--metrics-address \(text): \(portPart) is not a port")
            }
            self.port = port
            let host = hostPart.isEmpty ? "0.0.0.0" : String(hostPart)
            self.host = host == "localhost" ? "127.0.0.1" : host
            if !isIPv6, (try? sockaddr_in.inet(ip4: self.host, port: port)) == nil {
                throw CLIError.usage("--metrics-address \(text): \(host) is not an IPv4 address ([v6]:PORT for IPv6)")
            }
            if isIPv6, (try? sockaddr_in6.inet6(ip6: self.host, port: port)) == nil {
                throw CLIError.usage("--metrics-address \(text): \(host) is not an IPv6 address")
            }
        }

        var description: String { isIPv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    let address: Address
    private let registry: PrometheusCollectorRegistry
    private let server: BackgroundHTTPServer

    /// Makes the Prometheus registry the process's metrics backend. Must run
    /// before the layers make their metric objects (before the filesystem
    /// and the FUSE session exist).
    init(address: Address) throws {
        self.address = address
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        // FUSE requests take microseconds to seconds; HTTP up to minutes.
        factory.defaultDurationHistogramBuckets = [
            .microseconds(50), .microseconds(100), .microseconds(250), .microseconds(500),
            .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
            .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
            .seconds(1), .seconds(2), .seconds(5), .seconds(10), .seconds(30), .seconds(60),
        ]
        MetricsSystem.bootstrap(factory)
        self.registry = registry
        server = BackgroundHTTPServer(address.isIPv6
            ? HTTPServer(address: try sockaddr_in6.inet6(ip6: address.host, port: address.port), logger: .disabled)
            : HTTPServer(address: try sockaddr_in.inet(ip4: address.host, port: address.port), logger: .disabled),
            name: "metrics endpoint")
    }

    /// Starts serving; throws (exit 5) when the address cannot be used.
    func start(filesystem: FileSystem, logger: Logger) async throws {
        let gauges = StatusGauges()
        let registry = self.registry
        await server.server.appendRoute("GET /metrics") { _ in
            gauges.update(from: filesystem.status())
            return HTTPResponse(
                statusCode: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: Data(registry.emitToBuffer()))
        }
        do {
            try await server.start(logger: logger)
        } catch {
            throw CLIError.bucket("cannot serve metrics on \(address): \(error)", exitCode: 5)
        }
        logger.info("serving metrics", metadata: ["address": "http://\(address)/metrics"])
    }

    func stop() async { await server.stop() }
}

/// Gauges set from `FileSystem.status()` at each scrape.
private final class StatusGauges: Sendable {
    let blockCacheBytes = Gauge(label: "bucketfs_block_cache_bytes")
    let blockCacheCapacity = Gauge(label: "bucketfs_block_cache_capacity_bytes")
    let readAheadInUse = Gauge(label: "bucketfs_read_ahead_bytes_in_use")
    let readAheadBudget = Gauge(label: "bucketfs_read_ahead_budget_bytes")
    let uploadsInFlight = Gauge(label: "bucketfs_uploads_in_flight")
    let pendingUploads = Gauge(label: "bucketfs_pending_uploads")
    let recoveryEntries = Gauge(label: "bucketfs_recovery_entries")
    let cachedNames = Gauge(label: "bucketfs_metadata_cache_entries")

    func update(from status: FileSystemStatus) {
        let caches = status.caches
        blockCacheBytes.record(caches.blockCacheBytes)
        blockCacheCapacity.record(caches.blockCacheCapacityBytes)
        readAheadInUse.record(caches.readAheadBytesInUse)
        readAheadBudget.record(caches.readAheadBudgetBytes)
        uploadsInFlight.record(status.pendingUploads.filter { $0.state == .uploading }.count)
        pendingUploads.record(status.pendingUploads.count)
        recoveryEntries.record(status.recovery.count)
        // Listed names are entries of the one table: counted once.
        cachedNames.record(caches.statEntries)
    }
}
