/// The lifecycle of a parallel composite upload sent while its file is
/// written in order (`PartsStream` runs it): which bytes become which
/// part, how many parts are in flight, and what the upload ends as.
///
/// Every `partSize` bytes the writer adds become one part, numbered in
/// file order; the close adds the rest (`finish`), in parts of at most
/// `partSize`. Part `i` starts only once part `i - width` has ended, so at
/// most `width` are in flight while the writer goes on. A part that
/// failed fails the upload: the next send or the finish reports it, and
/// the owner uploads the whole file another way. Once over (finished or
/// abandoned) nothing more is sent; every part ever started is the
/// owner's to delete, stored or not (a part whose answer was lost may
/// exist all the same).
struct StreamedParts: Sendable, Equatable {
    let partSize: Int64
    let width: Int
    /// Bytes handed to parts so far (a multiple of `partSize` until the
    /// finish).
    private(set) var queuedEnd: Int64 = 0
    private(set) var parts: [Part] = []
    private(set) var phase = Phase.sending

    struct Part: Sendable, Equatable {
        let range: Range<Int64>
        var state: PartState
    }

    enum PartState: Sendable, Equatable {
        case inFlight
        case stored(crc32c: UInt32)
        case failed(StoreError)
    }

    enum Phase: Sendable, Equatable {
        case sending
        case finishing(size: Int64)
        case over
    }

    /// A part to upload: bytes `range`, as part `index`, once part `after`
    /// has ended (nil: at once).
    struct Launch: Sendable, Equatable {
        let index: Int
        let range: Range<Int64>
        let after: Int?
    }

    /// What the upload became once every part ended.
    enum Outcome: Sendable, Equatable {
        /// Every part stored: compose them, in this order.
        case compose([StoredPart])
        case failed(StoreError)
    }

    struct StoredPart: Sendable, Equatable {
        let index: Int
        let crc32c: UInt32
        let length: Int64
    }

    init(partSize: Int64, width: Int) {
        self.partSize = max(1, partSize)
        self.width = max(1, width)
    }

    /// The file holds `end` bytes in order (a multiple of `partSize`): the
    /// parts that are new, or the failure that ends the upload.
    mutating func send(upTo end: Int64) -> Result<[Launch], StoreError> {
        guard case .sending = phase else { return .failure(.cancelled) }
        if let failure { return .failure(failure) }
        guard end % partSize == 0, end >= queuedEnd else {
            return .failure(.invalidArgument("parts are sent up to a multiple of \(partSize) from \(queuedEnd), not to \(end)"))
        }
        return .success(queue(upTo: end))
    }

    /// The close: the file is `size` bytes. The parts for the rest, or the
    /// failure that ends the upload (then it is over).
    mutating func finish(size: Int64) -> Result<[Launch], StoreError> {
        guard case .sending = phase else { return .failure(.cancelled) }
        let problem = failure ?? (size < queuedEnd ? .invalidArgument("a file of \(size) bytes, \(queuedEnd) sent in parts already") : nil)
        if let problem {
            phase = .over
            return .failure(problem)
        }
        phase = .finishing(size: size)
        return .success(queue(upTo: size))
    }

    /// Part `index` ended.
    mutating func ended(_ index: Int, _ result: Result<UInt32, StoreError>) {
        guard parts.indices.contains(index), case .inFlight = parts[index].state else { return }
        switch result {
        case .success(let crc): parts[index].state = .stored(crc32c: crc)
        case .failure(let error): parts[index].state = .failed(error)
        }
    }

    /// Every part started has ended (the owner waited for them after the
    /// finish): what to do with them. The upload is over.
    mutating func outcome() -> Outcome {
        guard case .finishing(let size) = phase else { return .failed(.cancelled) }
        phase = .over
        if let failure { return .failed(failure) }
        var stored: [StoredPart] = []
        for (index, part) in parts.enumerated() {
            guard case .stored(let crc) = part.state else { return .failed(.other("part \(index) did not end")) }
            stored.append(StoredPart(index: index, crc32c: crc, length: Int64(part.range.count)))
        }
        guard queuedEnd == size else { return .failed(.other("\(queuedEnd) of \(size) bytes in parts")) }
        return .compose(stored)
    }

    /// Drops the upload: nothing more is sent. The parts started (all of
    /// them, for the owner to stop and delete).
    mutating func abandon() -> [Int] {
        phase = .over
        return Array(parts.indices)
    }

    var isOver: Bool { phase == .over }

    /// Bytes stored in parts from the start of the file without a gap.
    var stored: Int64 {
        var end: Int64 = 0
        for part in parts {
            guard case .stored = part.state else { break }
            end = part.range.upperBound
        }
        return end
    }

    /// The first failed part's error.
    private var failure: StoreError? {
        for part in parts { if case .failed(let error) = part.state { return error } }
        return nil
    }

    private mutating func queue(upTo end: Int64) -> [Launch] {
        var launches: [Launch] = []
        while queuedEnd < end {
            let index = parts.count
            let range = queuedEnd..<min(end, queuedEnd + partSize)
            parts.append(Part(range: range, state: .inFlight))
            launches.append(Launch(index: index, range: range, after: index >= width ? index - width : nil))
            queuedEnd = range.upperBound
        }
        return launches
    }
}
