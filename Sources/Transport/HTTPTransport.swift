import Foundation
import Logging
import Synchronization

/// The process's HTTP client: async/await over one curl multi handle driven
/// by its own thread (`CurlEngine`), with Google's retry guidance applied.
///
/// Retries: a request marked idempotent (or made so by a precondition) is
/// sent again after a connection failure, a stall, or a 408/429/5xx answer,
/// with truncated exponential backoff and jitter, within the policy's attempt
/// and time budget. A streamed download is retried only while none of its
/// body has reached the sink; after that the caller resumes with a Range.
public final class HTTPTransport: Sendable {
    public let configuration: TransportConfiguration
    public let statistics = TransportStatistics()
    private let engine: CurlEngine
    private let logger: Logger
    /// Jitter source; replaceable so tests can observe the schedule.
    private let random: @Sendable () -> Double

    public init(
        configuration: TransportConfiguration = TransportConfiguration(),
        logger: Logger = Logger(label: "bucketfs.transport"),
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
    ) {
        self.configuration = configuration
        self.logger = logger
        self.random = random
        self.engine = CurlEngine(maxConnectionsPerHost: configuration.maxConnectionsPerHost)
    }

    /// A transport with default settings, shared by everything in the
    /// process that does not configure its own.
    public static let shared = HTTPTransport()

    /// The libcurl version in use.
    public static var curlVersion: String { CurlGlobal.version }

    /// Sends `request` and returns the response with its body buffered.
    /// Any HTTP status is a response; only failures below HTTP throw.
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        try await sendWithRetries(request, sink: nil)
    }

    /// Sends `request`, streaming a successful body to `sink`.
    public func send(_ request: HTTPRequest, sink: @escaping ResponseBodySink) async throws -> HTTPResponse {
        try await sendWithRetries(request, sink: sink)
    }

    private func sendWithRetries(_ request: HTTPRequest, sink: ResponseBodySink?) async throws -> HTTPResponse {
        // A growing file's bytes cannot be read again from the start here.
        var request = request
        if request.body.isOfUnknownLength { request.isIdempotent = false }
        var budget = RetryBudget(policy: configuration.retry, jitter: random)
        while true {
            statistics.recordRequest(request.method)
            let reason: String
            let outcome: Result<HTTPResponse, TransportError>
            let started = ContinuousClock.now
            let transfer = try CurlTransfer(
                request: request, sink: sink, configuration: configuration, statistics: statistics)
            do {
                outcome = .success(try await performOnce(transfer))
            } catch let error as TransportError {
                outcome = .failure(error)
            }
            TransportMetrics.shared.recordAttempt(
                method: request.method.rawValue, status: try? outcome.get().status, since: started)
            switch outcome {
            case .success(var response):
                response.attempts = budget.failures + 1
                guard request.isIdempotent, RetryPolicy.isRetryable(status: response.status) else { return response }
                reason = "HTTP \(response.status)"
            case .failure(let error):
                // Whatever ended the attempt (a cut, a stall, ...), bytes the
                // sink already has must not reach it a second time: sending
                // the request again would deliver them from the start again.
                // Only the caller knows how to go on (a Range from the first
                // missing byte), so the failure is its to handle.
                guard request.isIdempotent, error.isRetryable, transfer.bodyBytesDelivered == 0 else { throw error }
                reason = error.description
            }
            guard let delay = budget.nextDelay() else {
                logger.debug("giving up", metadata: [
                    "method": "\(request.method.rawValue)", "url": "\(Self.redacted(request.url))",
                    "attempts": "\(budget.failures)", "reason": "\(reason)",
                ])
                switch outcome {
                case .success(var response):
                    response.attempts = budget.failures
                    return response
                case .failure(let error): throw error
                }
            }
            statistics.recordRetry()
            TransportMetrics.shared.recordRetry(method: request.method.rawValue)
            // A blip is routine (debug); a request failing for a while is an
            // outage the user should hear about while it lasts.
            let level: Logger.Level = budget.elapsed >= Self.outageWarningAfter ? .warning : .debug
            logger.log(level: level, "storage request failing; retrying", metadata: [
                "method": "\(request.method.rawValue)", "url": "\(Self.redacted(request.url))",
                "attempt": "\(budget.failures)", "failing for": "\(Self.rounded(budget.elapsed))",
                "delay": "\(Self.rounded(delay))", "reason": "\(reason)",
            ])
            do {
                try await Task.sleep(for: delay)
            } catch {
                throw TransportError.cancelled
            }
        }
    }

    /// How long a request fails before its retries are logged at warning.
    static let outageWarningAfter: Duration = .seconds(5)

    static func rounded(_ d: Duration) -> String { String(format: "%.2f s", d.seconds) }

    private func performOnce(_ transfer: CurlTransfer) async throws -> HTTPResponse {
        if Task.isCancelled { throw TransportError.cancelled }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                transfer.setContinuation(continuation)
                engine.submit(transfer)
            }
        } onCancel: {
            engine.cancel(transfer)
        }
    }

    /// The URL without its query, for logs: queries may carry upload ids.
    static func redacted(_ url: String) -> String {
        url.split(separator: "?", maxSplits: 1).first.map(String.init) ?? url
    }
}

/// Counters of what the transport did; cheap enough to keep always on.
public final class TransportStatistics: Sendable {
    private let requests = Atomic<Int>(0)
    private let retries = Atomic<Int>(0)
    private let connections = Atomic<Int>(0)
    private let byMethod = Mutex<[String: Int]>([:])

    func recordRequest(_ method: HTTPRequest.Method) {
        requests.add(1, ordering: .relaxed)
        byMethod.withLock { $0[method.rawValue, default: 0] += 1 }
    }

    func recordRetry() { retries.add(1, ordering: .relaxed) }

    func recordConnections(_ n: Int) { connections.add(n, ordering: .relaxed) }

    /// New TCP connections opened; fewer than requests means reuse.
    public var connectionsOpened: Int { connections.load(ordering: .relaxed) }

    /// Attempts sent, including retries.
    public var requestCount: Int { requests.load(ordering: .relaxed) }
    public var retryCount: Int { retries.load(ordering: .relaxed) }
    public var requestsByMethod: [String: Int] { byMethod.withLock { $0 } }
}
