import Testing
@testable import Transport

@Suite struct RetryPolicyTests {
    let policy = RetryPolicy(
        maxAttempts: 6, initialBackoff: .seconds(1), maxBackoff: .seconds(32), multiplier: 2,
        totalTimeout: .seconds(120))

    @Test func backoffDoublesFromTheInitialDelay() {
        let delays = (0..<5).map { policy.delay(beforeRetry: $0, jitter: 0).seconds }
        #expect(delays == [1, 2, 4, 8, 16])
    }

    /// Google's example: wait 2^n seconds plus at most 1000 random
    /// milliseconds, never more than maximum_backoff
    /// (https://cloud.google.com/storage/docs/retry-strategy).
    @Test func jitterAddsUpToOneInitialBackoff() {
        #expect(policy.delay(beforeRetry: 1, jitter: 0.5) == .milliseconds(2500))
        #expect(policy.delay(beforeRetry: 4, jitter: 0.44) == .milliseconds(16440), "not 16 s × 1.44 = 23.04 s")
        let highest = (0..<6).map { policy.delay(beforeRetry: $0, jitter: 0.999) }
        #expect(highest == [1999, 2999, 4999, 8999, 16999, 32000].map { .milliseconds($0) }, "\(highest)")
    }

    // Checks semantics.md#net-request-retries
    @Test func backoffIsCappedAtTheMaximumWithJitter() {
        #expect(policy.delay(beforeRetry: 10, jitter: 0).seconds == 32)
        #expect(policy.delay(beforeRetry: 5, jitter: 0.9).seconds == 32)
        // The mount's policy (MountFlags): 0.1 s doubling, never over 16 s.
        let mount = RetryPolicy(maxAttempts: 20, initialBackoff: .milliseconds(100), maxBackoff: .seconds(16), totalTimeout: .seconds(60))
        for retry in 0..<20 {
            for jitter in [0, 0.5, 0.999] {
                let wait = mount.delay(beforeRetry: retry, jitter: jitter)
                #expect(wait <= .seconds(16), "retry \(retry), jitter \(jitter): \(wait)")
                #expect(wait >= min(.milliseconds(100) * (1 << min(retry, 20)), .seconds(16)), "retry \(retry): \(wait)")
            }
        }
        #expect(mount.delay(beforeRetry: 0, jitter: 0.5) == .milliseconds(150))
    }

    @Test(arguments: [408, 429, 500, 502, 503, 504])
    func retryableStatuses(status: Int) { #expect(RetryPolicy.isRetryable(status: status)) }

    @Test(arguments: [200, 204, 308, 400, 401, 403, 404, 409, 412])
    func finalStatuses(status: Int) { #expect(!RetryPolicy.isRetryable(status: status)) }

    @Test func connectionFailuresAreRetryableButCancellationIsNot() {
        #expect(TransportError.cannotConnect("x").isRetryable)
        #expect(TransportError.connectionLost("x", bodyBytesReceived: 0).isRetryable)
        #expect(TransportError.stalled("x").isRetryable)
        #expect(!TransportError.cancelled.isRetryable)
        #expect(!TransportError.other(code: 3, message: "bad url").isRetryable)
    }

    @Test func aBudgetEndsAtItsAttemptsAndStartsAfreshAfterProgress() {
        var budget = RetryBudget(policy: RetryPolicy(maxAttempts: 3, initialBackoff: .milliseconds(10), totalTimeout: .seconds(60)), jitter: { 0 })
        #expect(budget.nextDelay() == .milliseconds(10))
        #expect(budget.nextDelay() == .milliseconds(20))
        #expect(budget.nextDelay() == nil, "the third failure is the last of three attempts")
        budget.reset()
        #expect(budget.failures == 0)
        #expect(budget.nextDelay() == .milliseconds(10))
    }

    @Test func aBudgetEndsWhenTheNextWaitWouldPassItsTotalTime() {
        var budget = RetryBudget(policy: RetryPolicy(maxAttempts: 100, initialBackoff: .seconds(1), maxBackoff: .seconds(8), totalTimeout: .seconds(5)), jitter: { 0 })
        #expect(budget.nextDelay() == .seconds(1))
        #expect(budget.nextDelay() == .seconds(2))
        #expect(budget.nextDelay() == .seconds(4))
        #expect(budget.nextDelay() == nil, "8 s more would pass the 5 s budget")
    }
}
