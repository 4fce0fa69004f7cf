import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The files the block cache keeps its blocks in: `directory/chunks/NNNN`,
/// each `slotsPerChunk` fixed-size slots of one header page and room for
/// one block (`BlockFile`). A block is written into its slot with
/// `pwrite`, so caching a block creates no file and no inode: a file per
/// block put ext4's inode allocation at a third of the writer's CPU.
///
/// A chunk file is made sparse at its full size (`ftruncate`): a slot
/// takes disk space only where it was written, so a small block costs
/// its pages, not a whole slot, and a freed slot is given back to the
/// filesystem by punching a hole (`fallocate`). Where the filesystem
/// cannot punch holes, a freed slot keeps its bytes (still counted, see
/// `BlockCacheIndex`) until it is reused.
///
/// `chunks/layout` records the slot geometry; chunk files of another
/// geometry are removed at start, never read. One directory belongs to
/// one process at a time.
final class ChunkFiles: Sendable {
    static let slotsPerChunk = 64
    /// Filesystem block granularity: what a partly used page costs.
    static let page = 4096

    let directory: String
    /// Bytes a slot's payload may take: the cache's block size.
    let blockSize: Int
    /// Bytes from one slot to the next: a header page and the payload
    /// rounded up to whole pages.
    let slotStride: Int64
    // Leaf lock; never held together with the index's. Only the opening
    // of a chunk file happens under it.
    private let descriptors = OrderedLock("block cache chunk files", [Int: Int32]())
    /// Where slots are read in place; nil where that cannot run.
    private let mappings: ChunkMappings?

    init(directory: String, blockSize: Int, readsInPlace: Bool = ChunkMappings.isAvailable) {
        self.directory = directory
        self.blockSize = blockSize
        self.slotStride = Int64(BlockFile.headerSize) + Self.pages(blockSize)
        self.mappings = readsInPlace ? ChunkMappings(chunkLength: Int(slotStride) * Self.slotsPerChunk) : nil
    }

    deinit {
        descriptors.withLock { open in
            for fd in open.values { close(fd) }
        }
    }

    /// `length` rounded up to whole pages.
    static func pages(_ length: Int) -> Int64 {
        Int64((length + page - 1) / page * page)
    }

    /// Disk bytes a block of `length` bytes takes in its slot.
    static func cost(ofLength length: Int) -> Int64 {
        Int64(BlockFile.headerSize) + pages(length)
    }

    private func offset(of slot: Int) -> Int64 { Int64(slot % Self.slotsPerChunk) * slotStride }

    /// The chunk file and offset of `slot` (tests, diagnostics).
    func location(ofSlot slot: Int) -> (path: String, offset: Int64) {
        (path(ofChunk: slot / Self.slotsPerChunk), offset(of: slot))
    }

    private func path(ofChunk chunk: Int) -> String {
        directory + "/" + String(format: "%04d", chunk)
    }

    private var layoutPath: String { directory + "/layout" }
    private var layoutText: String {
        "bucketfs block cache chunks: \(Self.slotsPerChunk) slots of \(slotStride) bytes, header version \(BlockFile.version)\n"
    }

    /// Makes the directory, and empties it when its files were written
    /// with another geometry or format.
    func prepare() throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let recorded = try? String(contentsOfFile: layoutPath, encoding: .utf8)
        guard recorded != layoutText else { return }
        for chunk in chunkNumbers() { unlink(path(ofChunk: chunk)) }
        try layoutText.write(toFile: layoutPath, atomically: true, encoding: .utf8)
    }

    private func chunkNumbers() -> [Int] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { !$0.isEmpty && $0.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") } }
            .compactMap { Int($0) }
    }

    /// The open descriptor of `slot`'s chunk file; with `create`, the file
    /// is made (sparse, at its full size) if missing.
    func descriptor(forSlot slot: Int, create: Bool) -> Int32? {
        let chunk = slot / Self.slotsPerChunk
        return descriptors.withLock { open -> Int32? in
            if let fd = open[chunk] { return fd }
            let fd = Glibc.open(path(ofChunk: chunk), O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0o600)
            guard fd >= 0 else { return nil }
            let size = slotStride * Int64(Self.slotsPerChunk)
            var info = stat()
            if fstat(fd, &info) == 0, Int64(info.st_size) < size, ftruncate(fd, off_t(size)) != 0 {
                close(fd)
                return nil
            }
            open[chunk] = fd
            return fd
        }
    }

    // MARK: - Slots

    /// Writes `payload`, then `header`, into `slot`.
    ///
    /// The slot's pages are allocated first, in one `fallocate` (as
    /// unwritten extents, which read as zeros until written back), so the
    /// `pwrite`s into a hole need no delayed allocation page by page: in a
    /// perf profile of a cold 256 MiB read into an empty cache, ext4's
    /// per-block reservation (`ext4_da_get_block_prep`) was 11% of the
    /// mount's CPU and 2% after; ten alternating rounds, 19.5 ticks of CPU
    /// against 21 at the median. Best effort: where it fails (no
    /// `fallocate`, a full disk) the writes allocate as before, or fail.
    func write(slot: Int, header: Data, payload: Data) -> Bool {
        guard let fd = descriptor(forSlot: slot, create: true) else { return false }
        let base = offset(of: slot)
        Self.allocate(fd, offset: base, length: Self.cost(ofLength: payload.count))
        return BlockFile.writeAll(fd, payload, at: base + Int64(BlockFile.headerSize)) && BlockFile.writeAll(fd, header, at: base)
    }

    /// Bytes `range` of `slot`'s payload.
    func read(slot: Int, range: Range<Int>) -> Data? {
        guard let fd = descriptor(forSlot: slot, create: false) else { return nil }
        return BlockFile.readExactly(fd, count: range.count, at: offset(of: slot) + Int64(BlockFile.headerSize + range.lowerBound))
    }

    /// Bytes `range` of `slot`'s payload in place, in the chunk file's
    /// mapping (`ChunkMappings`: touch them only through its guarded
    /// functions or the kernel); nil where the file cannot be mapped.
    /// The caller pins the slot while the bytes are in use.
    func payloadInPlace(slot: Int, range: Range<Int>) -> UnsafeRawBufferPointer? {
        guard let mappings, let fd = descriptor(forSlot: slot, create: false),
            let base = mappings.base(ofChunk: slot / Self.slotsPerChunk, descriptor: fd)
        else { return nil }
        // Within the mapping: the slot is in this chunk and `range` within
        // its payload (the caller checks it against the block's length).
        return UnsafeRawBufferPointer(start: base + Int(offset(of: slot)) + BlockFile.headerSize + range.lowerBound, count: range.count)
    }

    /// A read of `count` bytes of `slot` in place is done with them.
    func finishedInPlace(slot: Int, count: Int) {
        mappings?.finishedReading(chunk: slot / Self.slotsPerChunk, count: count)
    }

    /// Gives the bytes of `slot` from `from` (an offset in the slot) to
    /// its end back to the filesystem; false where it cannot punch holes.
    @discardableResult
    func punch(slot: Int, from: Int64 = 0) -> Bool {
        guard from < slotStride, let fd = descriptor(forSlot: slot, create: false) else { return from >= slotStride }
        return Self.punchHole(fd, offset: offset(of: slot) + from, length: slotStride - from)
    }

    /// What the files hold: every slot with a valid header, and the slots
    /// holding anything else (torn writes, garbage), which are punched.
    func scan() -> (found: [(slot: Int, header: BlockFile.Header)], slotCount: Int) {
        var found: [(slot: Int, header: BlockFile.Header)] = []
        var slotCount = 0
        for chunk in chunkNumbers().sorted() {
            let first = chunk * Self.slotsPerChunk
            guard let fd = descriptor(forSlot: first, create: false) else { continue }
            slotCount = max(slotCount, first + Self.slotsPerChunk)
            for slot in first..<(first + Self.slotsPerChunk) {
                let base = offset(of: slot)
                if let page = BlockFile.readExactly(fd, count: BlockFile.headerSize, at: base),
                    let header = BlockFile.decodeHeader(page, maxPayload: blockSize)
                {
                    found.append((slot, header))
                } else if Self.holdsData(fd, from: base, to: base + slotStride) {
                    Self.punchHole(fd, offset: base, length: slotStride)
                }
            }
        }
        return (found, slotCount)
    }

    /// Whether any byte of `from..<to` is data rather than a hole.
    private static func holdsData(_ fd: Int32, from: Int64, to: Int64) -> Bool {
        let next = lseek(fd, off_t(from), 3 /* SEEK_DATA */)
        // -1 with ENXIO: no data up to the end of the file.
        return next >= 0 && Int64(next) < to
    }

    @discardableResult
    private static func punchHole(_ fd: Int32, offset: Int64, length: Int64) -> Bool {
        guard let fallocate = fallocateFunction else { return false }
        return fallocate(fd, fallocatePunchHole | fallocateKeepSize, off_t(offset), off_t(length)) == 0
    }

    /// Allocates `length` bytes at `offset` within the file's size; false
    /// where the filesystem cannot.
    @discardableResult
    private static func allocate(_ fd: Int32, offset: Int64, length: Int64) -> Bool {
        guard let fallocate = fallocateFunction else { return false }
        return fallocate(fd, fallocateKeepSize, off_t(offset), off_t(length)) == 0
    }

    private static let fallocatePunchHole: Int32 = 0x02  // FALLOC_FL_PUNCH_HOLE
    private static let fallocateKeepSize: Int32 = 0x01  // FALLOC_FL_KEEP_SIZE
    private typealias Fallocate = @convention(c) (Int32, Int32, off_t, off_t) -> Int32
    /// glibc's `fallocate(2)`, which Swift's Glibc module leaves out (it is
    /// declared only under `_GNU_SOURCE`); looked up once.
    private static let fallocateFunction: Fallocate? = dlsym(nil, "fallocate").map { unsafeBitCast($0, to: Fallocate.self) }
}
