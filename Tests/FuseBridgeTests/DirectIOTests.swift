@testable import FuseBridge
import Logging
import Testing

/// When an open may ask the kernel for direct I/O (docs/semantics.md,
/// "Write-only descriptors bypass the page cache"): only on a kernel that
/// drops the pages other handles cached of a range a direct write covers.
@Suite struct DirectIOTests {
    // Checks semantics.md#write-only-direct
    @Test func onlyFromTheProtocolWhoseKernelDropsOtherHandlesPages() {
        let context = BridgeContext(filesystem: TinyFileSystem(), logger: Logger(label: "DirectIOTests"), maxRead: nil)
        #expect(!context.allowsDirectIO, "before FUSE_INIT nothing is known")
        context.kernelSpeaks(minor: 38)
        #expect(!context.allowsDirectIO, "FUSE 7.38, Linux 6.5 and older")
        context.kernelSpeaks(minor: 39)
        #expect(context.allowsDirectIO, "FUSE 7.39, Linux 6.6")
        context.kernelSpeaks(minor: 44)
        #expect(context.allowsDirectIO)
    }
}
