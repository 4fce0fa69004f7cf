import Foundation
import Testing
@testable import FSCore

@Suite("errno mapping")
struct ErrnoTests {
    @Test(arguments: [
        (StoreError.notFound("x"), ENOENT),
        (.bucketNotFound("b"), EIO),
        (.preconditionFailed("p"), ESTALE),
        (.unauthenticated("u"), EACCES),
        (.permissionDenied("d"), EACCES),
        (.invalidArgument("i"), EINVAL),
        (.unavailable("503"), EIO),
        (.quotaExceeded("429"), EAGAIN),
        (.cancelled, EINTR),
        (.other("?"), EIO),
    ])
    func storeErrorsMapToErrno(error: StoreError, expected: Int32) {
        #expect(error.errno == expected)
        let fsError = FSError(error, "stat bucket/x")
        #expect(fsError.errno == expected && fsError.message.contains("stat bucket/x") && fsError.message.contains(error.description))
    }
}
