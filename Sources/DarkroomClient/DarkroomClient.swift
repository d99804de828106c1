// DarkroomClient: the client side of DRK1 (protocol/drk1.md), used by the
// `darkroom` commands submit, watch, status, ls, get, rm and dead.
//
//   Producer       DEALER → broker frontend   SUBMIT, pipelined with a window
//   EventFollower  SUB ← broker events,       every event once, in seq order,
//                  DEALER → broker frontend   gaps filled with REPLAY
//   Admin          DEALER → broker frontend   STATUS, DEAD-LIST/-RETRY/-DISCARD, PING
//   StoreClient    DEALER → storage node      LIST, GET (sha256 checked), DELETE, STATS, PING
//
// Decisions:
// - Every call blocks and has a deadline (`timeout`, 5 s by default). A
//   silent server gives `ClientError` of kind `.timeout` whose message names
//   the server, its endpoint, the timeout and the command that starts it.
// - A request goes to the socket only while its monitor shows a finished
//   handshake: with no server listening, a send waits for a connection (up
//   to the timeout) instead of queueing requests that would all arrive,
//   stale, once a server starts. Not ZMQ_IMMEDIATE, which makes libzmq 4.3
//   abort a process that reconnects while reading a multipart message
//   (`HandshakeGuard.linked`).
// - Each client object owns its ZeroMQ sockets, so it belongs to the thread
//   that made it and is not Sendable. Make one per thread; they may share a
//   `Context`.
// - EventFollower keeps a cursor (the next seq to deliver) that moves per
//   event, never per call, so a call that throws midway loses nothing and
//   `.resume` repeats nothing. `watch` and `waitForJobs` ride out outages:
//   they ask a silent broker again with backoff and jitter (RetryBackoff)
//   from the cursor, and give up only on failures that cannot go away.
// - Request ids count up from 1 per socket; replies are matched by id, so a
//   late answer to a timed-out request is never taken for another's.
// - The producer gives every SUBMIT a submit key and resends it with the
//   same request id and key, so the broker queues it once however often it
//   goes. It resends after a silence of `timeout`, then with a growing,
//   jittered backoff, through a broker that is down, unreachable or
//   refusing for now, until `deadline` passes without a final answer; only
//   a failure no retry can mend (`isRetryable` false) ends it sooner.
// - The default submit priority is 5, the middle of 0…9, so jobs can be
//   submitted both below and above the default.
// - A malformed reply is answered with ERROR (never to an ERROR), as DRK1
//   asks of every receiver, and fails the request it names.
