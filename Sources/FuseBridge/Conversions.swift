internal import CFuse
import FSCore
import Foundation

// Swift reply values → the C structs libfuse sends to the kernel.

func makeTimespec(_ time: Timestamp) -> timespec {
    timespec(tv_sec: numericCast(time.seconds), tv_nsec: numericCast(time.nanoseconds))
}

func makeStat(_ attributes: FileAttributes) -> stat {
    var st = stat()
    st.st_ino = numericCast(attributes.inode)
    st.st_mode = attributes.mode
    st.st_nlink = numericCast(attributes.linkCount)
    st.st_uid = attributes.uid
    st.st_gid = attributes.gid
    st.st_size = numericCast(attributes.size)
    st.st_blocks = numericCast(attributes.blocks)
    st.st_blksize = numericCast(attributes.blockSize)
    st.st_atim = makeTimespec(attributes.accessTime)
    st.st_mtim = makeTimespec(attributes.modificationTime)
    st.st_ctim = makeTimespec(attributes.changeTime)
    st.st_rdev = numericCast(attributes.rdev)
    return st
}

func makeEntryParam(_ entry: EntryReply) -> fuse_entry_param {
    var param = fuse_entry_param()
    param.ino = entry.attributes.inode
    param.generation = 0
    param.attr = makeStat(entry.attributes)
    param.attr_timeout = entry.attributeTimeout
    param.entry_timeout = entry.entryTimeout
    return param
}

func makeStatvfs(_ statistics: FilesystemStatistics) -> statvfs {
    var buf = statvfs()
    buf.f_bsize = numericCast(statistics.blockSize)
    buf.f_frsize = numericCast(statistics.blockSize)
    buf.f_blocks = numericCast(statistics.blocks)
    buf.f_bfree = numericCast(statistics.freeBlocks)
    buf.f_bavail = numericCast(statistics.availableBlocks)
    buf.f_files = numericCast(statistics.files)
    buf.f_ffree = numericCast(statistics.freeFiles)
    buf.f_favail = numericCast(statistics.freeFiles)
    buf.f_namemax = numericCast(statistics.maximumNameLength)
    return buf
}

/// The open handle of an open, opendir or create answer. Direct I/O only
/// where the kernel keeps other handles' cached pages coherent with it
/// (`BridgeContext.allowsDirectIO`).
func makeFileInfo(_ open: OpenReply, allowsDirectIO: Bool) -> fuse_file_info {
    var fi = fuse_file_info()
    fi.fh = open.handle
    fi.direct_io = open.directIO && allowsDirectIO ? 1 : 0
    fi.keep_cache = open.keepCache ? 1 : 0
    fi.cache_readdir = open.cacheDirectory ? 1 : 0
    return fi
}
