"""Admission webhooks, called as kube-apiserver calls them.

The configurations are the `admissionregistration.k8s.io/v1` objects the server stores
(`MutatingWebhookConfiguration`, `ValidatingWebhookConfiguration`); `registry` compiles them into
`webhooks.Webhook` values when they change. For a create, update, delete or a `pods/binding` or
`pods/eviction` request that a webhook's rules (`rules`), namespace and object selectors
(`selectors`) match, `dispatch` sends an `AdmissionReview` (`review`) over HTTPS (`client`):
mutating webhooks one after another, their JSONPatch answers applied and the IfNeeded ones called
again when a later one changed the object, then validating webhooks, each under its failure policy
and timeout. `requests` is the glue the HTTP handlers and `operations.Api` call.

Modules are pure values and functions apart from `client` (the network) and `registry` and
`requests` (which read the store).
"""
