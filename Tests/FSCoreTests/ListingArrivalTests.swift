import Foundation
import Testing
@testable import FSCore
import FSCoreTesting

/// `ListingArrival` alone: pages in, the entries it hands out and the
/// waiters it resumes out; no store, no file system, no lock.
@Suite("a listing arriving page by page")
struct ListingArrivalTests {
    private func info(_ name: String, size: Int64 = 1) -> ObjectInfo {
        ObjectInfo(name: name, size: size, generation: 1, updated: Date(timeIntervalSince1970: 0))
    }

    private func page(items: [String] = [], prefixes: [String] = [], next: String?) -> ListPage {
        ListPage(prefixes: prefixes, items: items.map { info($0) }, nextPageToken: next)
    }

    private func names(_ children: [(String, MetadataCache.Node)]) -> [String] { children.map(\.0) }

    private func kinds(_ children: [(String, MetadataCache.Node)]) -> [String] {
        children.map { name, node in
            switch node {
            case .file: "\(name):file"
            case .directory: "\(name):dir"
            case .absent: "\(name):absent"
            }
        }
    }

    @Test func eachNameIsHandedOutOnceAndAnObjectWaitsForTheDirectoryOfItsName() {
        var arrival = ListingArrival<Int>(listed: "d/", staged: [])
        // `d/x/` sorts after `d/x` and after this page's last name: `x`
        // may still be hidden by a directory on the next page.
        let first = arrival.pageArrived(page(items: ["d/a", "d/b", "d/x"], next: "t1"))
        #expect(kinds(first.children) == ["a:file", "b:file"])
        #expect(kinds(first.listed) == ["a:file", "b:file"])
        let second = arrival.pageArrived(page(items: ["d/y"], prefixes: ["d/x/"], next: nil))
        #expect(kinds(second.children) == ["x:dir", "y:file"], "the directory hides the object of its name")
        #expect(kinds(second.listed) == ["x:dir", "y:file"])
        #expect(arrival.phase == .complete)
        let after = arrival.pageArrived(page(items: ["d/z"], next: nil))
        #expect(after.children.isEmpty, "nothing after the end")
    }

    @Test func namesBetweenAnObjectAndItsDirectoryKeepItHeldUntilThePageThatSettlesIt() {
        var arrival = ListingArrival<Int>(listed: "d/", staged: [])
        // Byte order: "d/a" < "d/a-b" < "d/a/" ('-' is 0x2d, '/' 0x2f).
        let first = arrival.pageArrived(page(items: ["d/0", "d/a", "d/a-b"], next: "t1"))
        #expect(names(first.children) == ["0"])
        let second = arrival.pageArrived(page(prefixes: ["d/a/"], next: "t2"))
        #expect(kinds(second.children) == ["a:dir", "a-b:file"])
        let third = arrival.pageArrived(page(items: ["d/b"], next: nil))
        #expect(kinds(third.children) == ["b:file"])
    }

    @Test func aHeldObjectWithNoDirectoryIsShownWithTheNextPage() {
        var arrival = ListingArrival<Int>(listed: "d/", staged: [])
        let first = arrival.pageArrived(page(items: ["d/a", "d/b"], next: "t"))
        #expect(names(first.children) == ["a"])
        let second = arrival.pageArrived(page(items: ["d/c"], next: "u"))
        #expect(names(second.children) == ["b"])
        let last = arrival.pageArrived(page(next: nil))
        #expect(names(last.children) == ["c"], "the last page settles what is held")
    }

    @Test func filesBeingWrittenReplaceTheirListedNamesAndComeLast() {
        let staged = [
            DirectoryHandle.StagedEntry(name: "a", file: info("d/a", size: 99)),
            DirectoryHandle.StagedEntry(name: "new", file: info("d/new", size: 5)),
            DirectoryHandle.StagedEntry(name: "gone", file: nil),
        ]
        var arrival = ListingArrival<Int>(listed: "d/", staged: staged)
        let first = arrival.pageArrived(page(items: ["d/a", "d/gone", "d/m"], next: "t"))
        #expect(names(first.children) == [], "a and gone are the staged files'; m is held")
        #expect(names(first.listed) == ["a", "gone"], "the listing being kept has what the store lists")
        let last = arrival.pageArrived(page(items: ["d/z"], next: nil))
        #expect(names(last.children) == ["m", "z", "a", "new"])
        #expect(last.children[2].1 == .file(info("d/a", size: 99)))
    }

    @Test func aServerThatRepeatsOrDisordersNamesStillGetsEachNameOnce() {
        var arrival = ListingArrival<Int>(listed: "d/", staged: [])
        let first = arrival.pageArrived(page(items: ["d/m"], prefixes: ["d/n/"], next: "t"))
        #expect(names(first.children) == ["m", "n"])
        // This page starts before the last one ended: from here on names
        // are checked against everything handed out.
        let second = arrival.pageArrived(page(items: ["d/a", "d/m"], prefixes: ["d/n/"], next: "u"))
        #expect(names(second.children) == ["a"])
        let last = arrival.pageArrived(page(items: ["d/m", "d/z"], next: nil))
        #expect(names(last.children) == ["z"])
    }

    @Test(arguments: [
        // (offset, entries made, phase) -> answer
        (2, 5, "arriving", "entries"),
        (5, 5, "arriving", "wait"),
        (9, 5, "arriving", "wait"),
        (5, 5, "complete", "entries"),
        (3, 5, "failed", "entries"),
        (5, 5, "failed", "fail"),
    ])
    func readdirWaitsOnlyPastTheEntriesMadeWhileTheListingArrives(offset: Int, available: Int, phase: String, answer: String) {
        var arrival = ListingArrival<Int>(listed: "d/", staged: [])
        let error = FSError(.ioError, "page 3")
        switch phase {
        case "complete": _ = arrival.pageArrived(page(next: nil))
        case "failed": _ = arrival.failed(error)
        default: break
        }
        let expected: ListingArrival<Int>.Answer = switch answer {
        case "entries": .entries
        case "wait": .wait
        default: .fail(error)
        }
        #expect(arrival.answer(offset: Int64(offset), available: available) == expected)
    }

    @Test func aWaiterIsResumedOnceByThePageTheEndOrItsInterruption() {
        var arrival = ListingArrival<Int>(listed: "d/", staged: [])
        let one = arrival.newWaiter()
        let two = arrival.newWaiter()
        #expect(one != two)
        let oneWaits = arrival.wait(one, 1, offset: 4, available: 4)
        // A page arrived between two's look and its registration: it does
        // not wait for the page after.
        let twoWaits = arrival.wait(two, 2, offset: 4, available: 6)
        #expect(oneWaits && !twoWaits)
        #expect(arrival.waiterCount == 1)
        let page1 = arrival.pageArrived(page(items: ["d/a"], next: "t"))
        #expect(page1.resume == [1])
        let late = arrival.stopWaiting(one)
        #expect(late == nil, "the page took it")

        let three = arrival.newWaiter()
        let threeWaits = arrival.wait(three, 3, offset: 4, available: 4)
        let interrupted = arrival.stopWaiting(three)
        #expect(threeWaits && interrupted == 3, "interrupted: taken back")
        let page2 = arrival.pageArrived(page(next: "u"))
        #expect(page2.resume.isEmpty)

        let four = arrival.newWaiter()
        let five = arrival.newWaiter()
        let fourWaits = arrival.wait(four, 4, offset: 4, available: 4)
        let fiveWaits = arrival.wait(five, 5, offset: 4, available: 4)
        #expect(fourWaits && fiveWaits)
        let failed = arrival.failed(FSError(.ioError, ""))
        let failedAgain = arrival.failed(FSError(.ioError, ""))
        #expect(failed.sorted() == [4, 5])
        #expect(failedAgain.isEmpty, "failed once")
        let six = arrival.newWaiter()
        let sixWaits = arrival.wait(six, 6, offset: 4, available: 4)
        #expect(!sixWaits, "nothing to wait for after a failure")

        var released = ListingArrival<Int>(listed: "d/", staged: [])
        let seven = released.newWaiter()
        let sevenWaits = released.wait(seven, 7, offset: 2, available: 2)
        let resumed = released.released()
        #expect(sevenWaits && resumed == [7])
    }
}
