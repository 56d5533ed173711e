"""A Kubernetes API server emulator for tests: the real `kubernetes` client talks to it over HTTP.

`server.KubeApiEmulator` is the entry point and `fixtures.kube_api` the pytest fixture. The
modules: `api` (REST semantics), `resources` (served kinds and discovery), `store`,
`managed_fields` (field ownership and server-side apply), `patches`, `selectors`,
`validation`, `quota` (ResourceQuota usage and admission), `controllers` (the statefulset
controller, garbage collector, scheduler and kubelet, run on demand), `faults` and `errors`.
"""
