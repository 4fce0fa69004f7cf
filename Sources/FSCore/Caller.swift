/// Who made the request being served, as the kernel tells the filesystem
/// (the process's effective uid and gid). New files, directories and links
/// belong to their caller, as on a local disk; the bridge sets `current`
/// around every request, and outside a request (tests, the core used on
/// its own) it is nil: new entries then belong to the mount's owner.
///
/// `requestID` numbers the kernel request (0 outside one): the log handlers
/// add it to every line logged while the request is served, so the lines
/// one `cp` caused can be found together.
public struct Caller: Sendable, Equatable {
    public var uid: UInt32
    public var gid: UInt32
    public var requestID: UInt64

    public init(uid: UInt32, gid: UInt32, requestID: UInt64 = 0) {
        self.uid = uid
        self.gid = gid
        self.requestID = requestID
    }

    @TaskLocal public static var current: Caller?
}
