import Foundation

/// CRC-32C of pieces of a file, and of their concatenation from the
/// pieces' checksums alone: a parallel upload checksums each part while
/// sending it and checks the composed object against the combination,
/// without a third pass over the bytes.
extension CRC32C {
    /// The checksum of bytes `range` of the file at `path`.
    public static func of(file path: String, range: Range<Int64>) throws(StorageError) -> UInt32 {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw StorageError.invalidArgument("cannot read \(path)")
        }
        defer { try? handle.close() }
        var crc = CRC32C()
        do {
            try handle.seek(toOffset: UInt64(range.lowerBound))
            var left = range.upperBound - range.lowerBound
            while left > 0, let piece = try handle.read(upToCount: Int(min(Int64(4 << 20), left))), !piece.isEmpty {
                crc.update(piece)
                left -= Int64(piece.count)
            }
            guard left == 0 else { throw StorageError.invalidArgument("\(path) is shorter than \(range.upperBound) bytes") }
        } catch let error as StorageError {
            throw error
        } catch {
            throw StorageError.invalidArgument("cannot read \(path): \(error)")
        }
        return crc.value
    }

    /// The checksum of A followed by B, from A's checksum, B's checksum
    /// and B's length: zlib's `crc32_combine` (Mark Adler's GF(2) matrix
    /// method) for the Castagnoli polynomial. It appends `lengthOfSecond`
    /// zero bytes to `first` by repeated squaring of the one-zero-bit
    /// operator, in O(log n) steps.
    public static func combine(_ first: UInt32, _ second: UInt32, lengthOfSecond: Int64) -> UInt32 {
        guard lengthOfSecond > 0 else { return first }
        var odd = [UInt32](repeating: 0, count: 32)
        var even = [UInt32](repeating: 0, count: 32)
        // The operator for one zero bit.
        odd[0] = 0x82F6_3B78
        var row: UInt32 = 1
        for n in 1..<32 {
            odd[n] = row
            row <<= 1
        }
        square(&even, odd)  // two zero bits
        square(&odd, even)  // four zero bits
        var crc = first
        var length = lengthOfSecond
        // The first squaring gives one zero byte; each further doubles it.
        while true {
            square(&even, odd)
            if length & 1 != 0 { crc = times(even, crc) }
            length >>= 1
            if length == 0 { break }
            square(&odd, even)
            if length & 1 != 0 { crc = times(odd, crc) }
            length >>= 1
            if length == 0 { break }
        }
        return crc ^ second
    }

    private static func times(_ matrix: [UInt32], _ vector: UInt32) -> UInt32 {
        var sum: UInt32 = 0
        var vector = vector
        var index = 0
        while vector != 0 {
            if vector & 1 != 0 { sum ^= matrix[index] }
            vector >>= 1
            index += 1
        }
        return sum
    }

    private static func square(_ result: inout [UInt32], _ matrix: [UInt32]) {
        for n in 0..<32 { result[n] = times(matrix, matrix[n]) }
    }
}
