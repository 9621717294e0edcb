"""The Model port's implementations: Anthropic, the scripted test doubles, the offline demo.

Also prices per model. Nothing else imports `anthropic`.
"""
