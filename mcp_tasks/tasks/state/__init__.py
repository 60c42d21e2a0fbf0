"""What changes task state: the task service (:mod:`.service`, by domain), the rows' SQL
(:mod:`.rows`, :mod:`.loop_database`), news after commit (:mod:`.outbox`), the snapshot's
encryption (:mod:`.crypto`) and the mails about questions."""
