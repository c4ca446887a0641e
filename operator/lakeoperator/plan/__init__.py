"""Pure decisions of the operator: the writer state machine and restart policy, table services' schedule,
a table's create/adopt/refuse. Values in, values out: no clock (`now` is passed), no Kubernetes API, no
kopf, no storage. The handlers turn the returned plans into API calls.
"""
