import Testing
@testable import FSCore

/// /proc/self/mountinfo as every layer reads it.
@Suite struct MountTableTests {
    static let sample = """
        22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
        35 22 0:30 / /tmp/a\\040b\\011c\\134d rw,nosuid,nodev,relatime shared:5 master:2 - fuse.bucketfs bucketfs rw,user_id=0
        36 22 0:31 / /mnt/x rw,relatime - fuse.bucketfs bucketfs rw
        37 36 0:32 / /mnt/x rw,relatime - tmpfs tmpfs rw
        not an entry
        """

    @Test func fieldsAndEscapedMountpoints() {
        let entries = MountTable.entries(parsing: Self.sample)
        #expect(entries.count == 4)
        #expect(entries[1] == MountTable.Entry(id: "35", device: "0:30", mountpoint: "/tmp/a b\tc\\d", type: "fuse.bucketfs"),
                "optional fields skipped, \\ooo escapes decoded")
        #expect(entries[0].type == "ext4")
    }

    @Test func theTopmostMountOnAMountpointIsTheLastEntry() {
        let onX = MountTable.entries(parsing: Self.sample).filter { $0.mountpoint == "/mnt/x" }
        #expect(onX.map(\.type) == ["fuse.bucketfs", "tmpfs"])
    }

    @Test func thisProcessSeesItsRootMount() {
        #expect(MountTable.entry(mountpoint: "/") != nil)
        #expect(MountTable.entry(mountpoint: "/no/such/mountpoint") == nil)
    }
}
