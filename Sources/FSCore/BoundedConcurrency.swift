/// Runs `body` on every element, at most `width` at a time, and returns
/// the outcomes in the order of `elements` once all have ended (a failure
/// does not stop the others: work already started runs to its end).
/// Directory rename copies this way; readdir over a store whose listings
/// lack metadata stats this way.
func boundedConcurrently<T: Sendable, R: Sendable>(
    _ elements: [T], width: Int, _ body: @escaping @Sendable (T) async throws(StoreError) -> R
) async -> [Result<R, StoreError>] {
    await withTaskGroup(of: (Int, Result<R, StoreError>).self) { group in
        var results = [Result<R, StoreError>?](repeating: nil, count: elements.count)
        var next = 0
        func startNext() {
            guard next < elements.count else { return }
            let index = next, element = elements[index]
            next += 1
            group.addTask {
                do throws(StoreError) { return (index, .success(try await body(element))) } catch { return (index, .failure(error)) }
            }
        }
        for _ in 0..<max(1, width) { startNext() }
        while let (index, result) = await group.next() {
            results[index] = result
            startNext()
        }
        return results.map { $0! }
    }
}
