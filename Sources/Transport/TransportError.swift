/// Failures below HTTP: the request never produced a complete response.
public enum TransportError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The host could not be resolved or refused/timed out the connection.
    case cannotConnect(String)
    /// The connection broke after the request started; `bodyBytesReceived`
    /// says how much of a streamed body had already reached the sink.
    case connectionLost(String, bodyBytesReceived: Int64)
    /// No progress for longer than the stall timeout.
    case stalled(String)
    /// The caller's task was cancelled.
    case cancelled
    /// The response sink threw; the transfer was aborted.
    case sinkFailed(String)
    /// Any other curl failure (bad URL, TLS error, ...).
    case other(code: Int, message: String)

    public var description: String {
        switch self {
        case .cannotConnect(let m): return "cannot connect: \(m)"
        case .connectionLost(let m, let n): return "connection lost after \(n) body bytes: \(m)"
        case .stalled(let m): return "transfer stalled: \(m)"
        case .cancelled: return "cancelled"
        case .sinkFailed(let m): return "response sink failed: \(m)"
        case .other(let code, let m): return "curl error \(code): \(m)"
        }
    }

    /// Whether the failure is of the kind Google's guidance retries
    /// (connection problems, timeouts), given an idempotent request.
    public var isRetryable: Bool {
        switch self {
        case .cannotConnect, .connectionLost, .stalled: return true
        case .cancelled, .sinkFailed, .other: return false
        }
    }
}
