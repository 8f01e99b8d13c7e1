"""storlab.report"""
