import Foundation

/// A `StorageError` as an `NSError` (domain `FIRStorageErrorDomain`, the
/// Firebase code): the error completion handlers and
/// `StorageTaskSnapshot.error` deliver, as the Firebase SDK does.
///
/// It is a real `NSError` instance because on Linux `error as? NSError` is
/// a plain class cast (there is no Objective-C bridging), and the Firebase
/// documentation's error handling depends on it:
///
///     if let error = snapshot.error as? NSError {
///         switch StorageErrorCode(rawValue: error.code)! {
///         case .objectNotFound: ...
///         case .cancelled: ...
///         }
///     }
///
/// `storageError` keeps the typed error; `StorageError(error)` recovers it
/// from any error StorageKit hands out. The `async` functions throw
/// `StorageError` itself (`error as NSError` bridges it to the same domain
/// and code).
///
/// `@unchecked Sendable`: NSError is immutable, and so is the one stored
/// property.
public final class StorageNSError: NSError, @unchecked Sendable {
    public let storageError: StorageError

    public init(_ error: StorageError) {
        storageError = error
        super.init(domain: StorageError.errorDomain, code: error.errorCode, userInfo: error.errorUserInfo)
    }

    public required init?(coder: NSCoder) { nil }

    override public var description: String { "\(domain) \(code): \(storageError)" }
}

extension StorageError {
    /// The `StorageError` behind any error StorageKit hands out: itself,
    /// the one inside a `StorageNSError`, `cancelled` for a cancelled task,
    /// else `unknown` with the error's description.
    public init(_ error: any Error) {
        if let bridged = error as? StorageNSError {
            self = bridged.storageError
        } else {
            self = ObjectAPI.map(error)
        }
    }

    /// This error as completion handlers and snapshots deliver it.
    var bridged: StorageNSError { StorageNSError(self) }
}
