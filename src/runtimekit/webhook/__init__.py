"""The kit's admission webhook: what pods may ask for, and who may write their GPU assignment.

Deployed beside the scheduler as HAMi's is (docs/user-guide/webhook.md). `/mutate` gives a pod that
asks for the kit's GPU resources the kit's scheduler (standalone mode; extender mode leaves it to
kube-scheduler) and, under HAMi's names, HAMi's default GPU count (`mutation`); `/validate` refuses
requests no node could ever satisfy, naming the field (`podrequests`, `annotations`), and assignment
annotations written by anyone but the kit's scheduler (`authority`). The decisions are pure functions of
an AdmissionReview, the settings (`settings`) and a watch-kept view of the nodes' GPUs (`fleet`):
`decide` routes a review to them and `review` writes the answer. `server` is the HTTPS adapter, with
certificates re-read when they change (`tlsfiles`); `certs` makes a CA and a serving certificate and
`registration` the webhook configurations, for `runtimekit up`.
"""
