"""What changes task state: the task service (:mod:`.service`, the one place that writes
task rows, by domain: :mod:`.lifecycle`, :mod:`.questions`, :mod:`.approvals`,
:mod:`.changes`, :mod:`.recovery`), the rows' SQL (:mod:`.rows`, :mod:`.loop_database`),
what a change tells after commit (:mod:`.outbox`), the snapshot's
encryption (:mod:`.crypto`) and the mails about questions."""
