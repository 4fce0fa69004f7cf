import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Answers one question for `flush`: does the process closing a descriptor
/// of a file still hold another descriptor of it open for writing?
///
/// Why: close(2) sends FUSE a flush for every descriptor, duplicates
/// included, and a shell's `cmd > f` opens `f`, duplicates the descriptor
/// onto 1 and closes the original before `cmd` writes a byte. Uploading at
/// that first close would upload every new file twice (once empty). When
/// the closing process still holds another writable descriptor of the same
/// file, that descriptor's own close (at the latest when the process exits)
/// sends another flush, so the upload can wait for it without any close
/// returning before its bytes are durable.
public protocol DescriptorProbe: Sendable {
    func holdsWritableDescriptor(pid: Int32, inode: UInt64) -> Bool
}

/// `DescriptorProbe` over /proc: `/proc/PID/fdinfo/*` name each open
/// descriptor's mount (`mnt_id`), inode (`ino`) and open flags, without
/// touching the file system behind them (no request comes back to us).
///
/// Every doubt answers false (upload now): a process we may not inspect, a
/// process that is exiting (its descriptor table is already gone while the
/// kernel closes its files), a kernel without `ino` in fdinfo.
public final class ProcDescriptorProbe: DescriptorProbe {
    private let mountpoint: String
    /// The mount's ID in /proc/self/mountinfo, found at first use (the
    /// probe is made before the mount exists).
    private let mountID = OrderedLock<String?>("descriptor probe mount id", nil)

    /// `mountpoint` as the mount table spells it: absolute, without
    /// symbolic links (the caller resolves it, with realpath(3), before the
    /// mount serves). Never resolved here: that stats the path, and for a
    /// mount made through a FUSE descriptor the path is already the mount's
    /// root, whose stat waits for the very FUSE loop this process has not
    /// started yet (a deadlock, seen when the mount's user could reach the
    /// directory).
    public init(mountpoint: String) {
        self.mountpoint = mountpoint
    }

    public func holdsWritableDescriptor(pid: Int32, inode: UInt64) -> Bool {
        guard pid > 0, let mount = currentMountID() else { return false }
        let directory = "/proc/\(pid)/fdinfo"
        guard let dir = opendir(directory) else { return false }
        defer { closedir(dir) }
        let wantedInode = String(inode)
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            guard name.first?.isNumber == true, let info = Self.fdinfo("\(directory)/\(name)") else { continue }
            if info.mountID == mount, info.inode == wantedInode, info.flags & O_ACCMODE != O_RDONLY { return true }
        }
        return false
    }

    private func currentMountID() -> String? {
        if let known = mountID.withLock({ $0 }) { return known }
        guard let found = MountTable.entry(mountpoint: mountpoint)?.id else { return nil }
        mountID.withLock { $0 = found }
        return found
    }

    private struct Info {
        var flags: Int32 = 0
        var mountID = ""
        var inode = ""
    }

    /// The fields of one fdinfo file (small: one read).
    private static func fdinfo(_ path: String) -> Info? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        // "name:\tvalue" lines, ASCII: parsed as bytes (this runs for every
        // descriptor of the closing process, on the flush path).
        var info = Info()
        for line in buffer[0..<count].split(separator: UInt8(ascii: "\n")) {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let value = line[(colon + 1)...].drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
            switch String(decoding: line[..<colon], as: UTF8.self) {
            case "flags": info.flags = Int32(String(decoding: value, as: UTF8.self), radix: 8) ?? 0
            case "mnt_id": info.mountID = String(decoding: value, as: UTF8.self)
            case "ino": info.inode = String(decoding: value, as: UTF8.self)
            default: break
            }
        }
        return info.inode.isEmpty ? nil : info
    }
}
