"""What queues work: rq queues (:mod:`.queue`), the fair lines (:mod:`.fair_queue`), rq's
bookkeeping, the event loop's sender (:mod:`.loop_redis`), embedded mode's Redis, coalescing."""
