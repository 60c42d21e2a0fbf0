"""What queues work: the rq queues (:mod:`.queue`), the fair lines jobs wait in
(:mod:`.fair_queue`), rq's bookkeeping of them, the queue's sender from the event loop
(:mod:`.loop_redis`), the embedded mode's fake Redis and the coalescing of calls to a
thread."""
