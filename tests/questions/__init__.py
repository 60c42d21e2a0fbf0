"""Questions during a task: elicitation, sampling and roots from the worker; e-mail to operators."""
