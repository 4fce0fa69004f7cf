import Foundation

/// Timeouts, connection limits and retry policy of a transport.
public struct TransportConfiguration: Sendable {
    /// Time allowed to establish a TCP (and TLS) connection.
    public var connectTimeout: Duration
    /// A transfer that moves fewer than `stallSpeedLimit` bytes per second for
    /// this long is aborted as stalled (curl's low-speed limit).
    public var stallTimeout: Duration
    public var stallSpeedLimit: Int
    /// Upper bound of simultaneous connections to one host.
    public var maxConnectionsPerHost: Int
    public var retry: RetryPolicy
    public var userAgent: String

    public init(
        connectTimeout: Duration = .seconds(10),
        stallTimeout: Duration = .seconds(30),
        stallSpeedLimit: Int = 1,
        maxConnectionsPerHost: Int = 16,
        retry: RetryPolicy = RetryPolicy(),
        userAgent: String = "bucketfs-storagekit/\(bucketfsVersion)"
    ) {
        self.connectTimeout = connectTimeout
        self.stallTimeout = stallTimeout
        self.stallSpeedLimit = stallSpeedLimit
        self.maxConnectionsPerHost = maxConnectionsPerHost
        self.retry = retry
        self.userAgent = userAgent
    }
}

/// Truncated exponential backoff with jitter, as Google recommends for Cloud
/// Storage (https://cloud.google.com/storage/docs/retry-strategy): the n-th
/// retry waits `initialBackoff * multiplier^n` plus a random jitter of up to
/// one `initialBackoff`, and never more than `maxBackoff`. With the default
/// 1 s that is Google's `min(2^n + random_number_milliseconds,
/// maximum_backoff)`, where the random part is at most 1000 ms. Retries stop
/// after `maxAttempts` attempts in all or once `totalTimeout` would be
/// exceeded.
public struct RetryPolicy: Sendable, Equatable {
    public var maxAttempts: Int
    public var initialBackoff: Duration
    public var maxBackoff: Duration
    public var multiplier: Double
    public var totalTimeout: Duration

    public init(
        maxAttempts: Int = 6,
        initialBackoff: Duration = .seconds(1),
        maxBackoff: Duration = .seconds(32),
        multiplier: Double = 2,
        totalTimeout: Duration = .seconds(120)
    ) {
        self.maxAttempts = maxAttempts
        self.initialBackoff = initialBackoff
        self.maxBackoff = maxBackoff
        self.multiplier = multiplier
        self.totalTimeout = totalTimeout
    }

    /// No retries at all.
    public static let none = RetryPolicy(maxAttempts: 1)

    /// The wait before retry number `retry` (0 for the first retry), with
    /// `jitter` in 0..<1 drawn by the caller so tests can fix it. The jitter
    /// is a fraction of one `initialBackoff`, not of the grown wait: it
    /// spreads clients apart without stretching the doubling.
    public func delay(beforeRetry retry: Int, jitter: Double) -> Duration {
        let base = initialBackoff.seconds * pow(multiplier, Double(retry))
        let spread = initialBackoff.seconds * max(0, min(jitter, 1))
        let wait = min(base + spread, maxBackoff.seconds)
        return .nanoseconds(Int64((wait * 1e9).rounded()))
    }

    /// HTTP statuses worth another attempt: request timeout, too many
    /// requests, and server errors.
    public static func isRetryable(status: Int) -> Bool {
        status == 408 || status == 429 || (500...599).contains(status)
    }
}

extension Duration {
    /// The duration in (fractional) seconds.
    public var seconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }

    /// The duration in whole nanoseconds (what metrics timers and atomics
    /// keep).
    public var nanoseconds: Int64 {
        let (s, atto) = components
        return s * 1_000_000_000 + atto / 1_000_000_000
    }
}
