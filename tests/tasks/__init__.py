"""The task engine: the tasks extension on the wire, the service, rows, workers, rq bookkeeping."""
