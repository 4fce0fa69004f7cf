/// Why a FUSE session could not be created, mounted or run.
public struct FuseError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// fuse_session_new rejected the arguments (libfuse printed why on stderr).
        case sessionCreationFailed
        /// fuse_session_mount failed (mountpoint missing, stale or not permitted).
        case mountFailed
        /// fuse_set_signal_handlers failed.
        case signalHandlersFailed
        /// fuse_loop_cfg_create returned NULL.
        case loopConfigurationFailed
        /// The session was already closed, or its loop is already running.
        case invalidState
    }

    public let kind: Kind
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}
