import Foundation

/// This process's view of the mounts (/proc/self/mountinfo): the one
/// reader of it for every layer (the descriptor probe, the bridge's
/// read-ahead setting, the CLI's mount watch and `status`).
public enum MountTable {
    public struct Entry: Sendable, Equatable {
        /// The mount ID (field 1), as fdinfo's `mnt_id` names it.
        public var id: String
        /// "MAJOR:MINOR" (field 3), as /sys/class/bdi names the mount's device.
        public var device: String
        /// Where it is mounted (field 5), unescaped.
        public var mountpoint: String
        /// The filesystem type (first field after the `-`): `fuse.bucketfs` for ours.
        public var type: String
    }

    /// Every mount, in the table's order (a later entry on the same
    /// mountpoint is mounted over the earlier one).
    public static func entries() -> [Entry] {
        guard let table = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return [] }
        return entries(parsing: table)
    }

    /// The entries of a mountinfo text; lines that are not entries are skipped.
    public static func entries(parsing table: String) -> [Entry] {
        table.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            // The optional fields end at "-"; the type follows it.
            guard fields.count > 4, let dash = fields.firstIndex(of: "-"), dash > 4, dash + 1 < fields.count else { return nil }
            return Entry(id: String(fields[0]), device: String(fields[2]), mountpoint: unescape(fields[4]), type: String(fields[dash + 1]))
        }
    }

    /// The topmost mount at `mountpoint` (an absolute path without
    /// symbolic links), if any.
    public static func entry(mountpoint: String) -> Entry? {
        entries().last { $0.mountpoint == mountpoint }
    }

    /// mountinfo writes space, tab, newline and backslash as \ooo.
    static func unescape(_ field: Substring) -> String {
        var bytes: [UInt8] = []
        var i = field.utf8.startIndex
        let utf8 = field.utf8
        while i < utf8.endIndex {
            if utf8[i] == UInt8(ascii: "\\"), let end = utf8.index(i, offsetBy: 4, limitedBy: utf8.endIndex),
               let value = UInt8(String(decoding: utf8[utf8.index(after: i)..<end], as: UTF8.self), radix: 8) {
                bytes.append(value)
                i = end
            } else {
                bytes.append(utf8[i])
                i = utf8.index(after: i)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
