"""Who may do what: the service-call policy and the people it knows."""
