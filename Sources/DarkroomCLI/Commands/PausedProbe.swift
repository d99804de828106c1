import DarkroomClient
import DarkroomZMQ
import Foundation
import Synchronization

/// Asks the broker once, on a thread of its own, whether PAUSE holds its
/// dispatch, so that `submit --wait` can say why its jobs wait instead of
/// waiting in silence. It never holds the submit up: until (or unless) the
/// broker answers, `pausedSince` is nil.
final class PausedProbe: Sendable {
    /// How long `submit --wait` follows without seeing a job end before it
    /// asks: the jobs of a paused queue never end, and the answer then
    /// comes a second later than it could; running jobs end well before.
    static let after = Duration.seconds(1)

    private let answer = Mutex<UInt64?>(nil)

    init(endpoint: String, context: Context, curve: CurveClientKeys?, timeout: Duration) {
        let thread = Thread { [self] in
            // Its own socket: a ZeroMQ socket belongs to the thread that made it.
            guard let admin = try? Admin(endpoint: endpoint, context: context, timeout: timeout, curve: curve),
                  let since = (try? admin.status())?.queue.pausedSince else { return }
            answer.withLock { $0 = since }
        }
        thread.name = "darkroom-paused-probe"
        thread.start()
    }

    /// When dispatch was paused, once the broker said it is.
    var pausedSince: UInt64? { answer.withLock { $0 } }
}
