"""The default TeaParty organisation, shipped as data (teaparty.yaml, workgroups/, agents/)."""
